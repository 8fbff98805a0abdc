"""How HTTP requests reach their server: directly or through a forwarding proxy, over kept-alive connections.

The proxy settings are the standard variables, read by :mod:`shardstream.config` (``http_proxy``/``HTTP_PROXY``,
``https_proxy``/``HTTPS_PROXY``, ``no_proxy``/``NO_PROXY``; the lower-case name wins where both are set, as in
curl). A plain ``http://`` request goes to the proxy in absolute form (``GET http://host/path``); an
``https://`` request goes through a ``CONNECT`` tunnel, so TLS still runs end to end. ``NO_PROXY`` lists hosts
(and domains: ``example.com`` also covers ``a.example.com``; ``*`` covers everything) reached directly.
Credentials in the proxy URL (``http://user:pass@proxy:3128``) are sent as ``Proxy-Authorization``.

>>> route = Route(http_proxy="http://proxy:3128", no_proxy="localhost,.internal")
>>> route.proxy_for("http", "data.example.com"), route.proxy_for("http", "ceph.internal")
('http://proxy:3128', None)
>>> route.proxy_for("https", "data.example.com") is None  # no https proxy set
True
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import threading
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

__all__ = ["ConnectionPool", "Route", "route_from_settings"]

_IDLE_PER_KEY = 32


@dataclasses.dataclass(frozen=True)
class Route:
    """The proxies of a process (None: direct) and the hosts that bypass them (``no_proxy``)."""

    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: str | None = None

    def proxy_for(self, scheme: str, host: str, port: int | None = None) -> str | None:
        """The proxy URL for a request to ``scheme://host:port``, or None to go directly."""
        proxy = self.https_proxy if scheme.lower() == "https" else self.http_proxy
        if not proxy:
            return None
        if self.no_proxy:
            where = f"{host}:{port}" if port else host
            bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
            if bypass(where, {"no": self.no_proxy}):
                return None
        return proxy if "://" in proxy else f"http://{proxy}"

    def connection_for(self, parts: SplitResult, timeout: float) -> tuple[str, tuple[Any, ...], Callable[[], Any]]:
        """``(request target, pool key, connection factory)`` for the URL ``parts``."""
        scheme, host = parts.scheme.lower(), parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        proxy = self.proxy_for(scheme, host, parts.port)
        bracketed = f"[{host}]" if ":" in host else host
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        if proxy is None:
            # the bare host: http.client puts an IPv6 address in brackets in the Host header itself
            return path, (scheme, host, port, None), lambda: cls(host, port, timeout=timeout)
        p = urlsplit(proxy)
        auth = {}
        if p.username is not None:
            cred = f"{unquote(p.username)}:{unquote(p.password or '')}".encode()
            auth = {"Proxy-Authorization": "Basic " + base64.b64encode(cred).decode()}
        proxy_host, proxy_port = p.hostname or "", p.port or 3128
        key = (scheme, host, port, proxy)
        if scheme == "https":
            def tunnel() -> http.client.HTTPConnection:
                conn = http.client.HTTPSConnection(proxy_host, proxy_port, timeout=timeout)
                conn.set_tunnel(bracketed, port, headers=auth or None)
                return conn
            return path, key, tunnel

        class Forwarded(http.client.HTTPConnection):
            def putrequest(self, method: str, url: str, *args: Any, **kw: Any) -> None:
                super().putrequest(method, url, *args, **kw)
                for name, value in auth.items():
                    self.putheader(name, value)

        absolute = f"http://{bracketed}{'' if port == 80 else f':{port}'}{path}"  # its Host header: no default port
        return absolute, key, lambda: Forwarded(proxy_host, proxy_port, timeout=timeout)


def route_from_settings(settings: Any) -> Route:
    """The :class:`Route` of the settings' ``http_proxy``, ``https_proxy`` and ``no_proxy``.

    >>> from shardstream.config import Settings
    >>> route_from_settings(Settings(http_proxy="http://p:8080")).proxy_for("http", "h")
    'http://p:8080'
    """
    return Route(getattr(settings, "http_proxy", None), getattr(settings, "https_proxy", None),
                 getattr(settings, "no_proxy", None))


class ConnectionPool:
    """Kept-alive HTTP connections by ``(scheme, host, port, proxy)``, shared by the threads of a process.

    >>> pool = ConnectionPool()
    >>> pool.take(("http", "h", 80, None)) is None
    True
    """

    def __init__(self) -> None:
        self._idle: dict[tuple[Any, ...], list[Any]] = {}
        self._lock = threading.Lock()

    def take(self, key: tuple[Any, ...]) -> Any:
        """An idle connection for ``key`` (the most recently used), or None."""
        with self._lock:
            idle = self._idle.get(key)
            return idle.pop() if idle else None

    def give(self, key: tuple[Any, ...], conn: Any) -> None:
        """Keep ``conn`` for the next request to ``key`` (closed instead when enough are kept)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < _IDLE_PER_KEY:
                idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
