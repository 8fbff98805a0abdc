"""Where an HTTP(S) request may go: the origin of a URL, the redirects that are followed, and where credentials
follow them (:class:`~shardstream.io.http.HttpStream`'s rules, one place).

A redirect is followed to an ``http://`` or ``https://`` URL with a host and a numeric port only (never to
``file:``, ``pipe:`` or another scheme). Credentials (``Authorization``, from ``https://user:password@host/`` or
the storage settings) follow a redirect to the same origin, or from http up to https on the same host; never to
another host or port, and never from https down to plain http.

>>> from urllib.parse import urlsplit
>>> home = origin(urlsplit("http://h/a.tar"))
>>> home, may_keep_credentials(home, origin(urlsplit("https://h/b.tar")))
(('http', 'h', 80), True)
>>> redirect_target("http://h/a/b.tar", "../c.tar", "b.tar")
'http://h/c.tar'
"""

from __future__ import annotations

from urllib.parse import SplitResult, urljoin, urlsplit

from ..errors import OpenError
from ..redact import redact

__all__ = ["may_keep_credentials", "origin", "redirect_target"]


def origin(parts: SplitResult) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL: where credentials may go (``ValueError`` for a port that is no number)."""
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def may_keep_credentials(home: tuple[str, str, int], there: tuple[str, str, int]) -> bool:
    """Credentials follow a redirect to the same origin, or from http to https on the same host; never to
    another host, and never from https down to plain http."""
    return there == home or (home[0] == "http" and there[0] == "https" and there[1] == home[1])


def redirect_target(url: str, location: str, name: str) -> str:
    """Where a redirect from ``url`` to ``location`` leads: an http(s) URL with a host and a numeric port, or an
    OpenError that names the shard (``name``) and never shows a secret."""
    try:
        target = urljoin(url, location)
        parts = urlsplit(target)
        origin(parts)
    except ValueError:
        raise OpenError(f"{name!r}: redirected to a malformed URL {redact(location)!r}", url=name) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise OpenError(f"{name!r}: redirected to {redact(target)!r}, which is not an http:// or https:// URL with "
                        "a host; shardstream follows redirects to HTTP(S) only", url=name)
    return target
