"""Ranged reads of a remote shard for the viewer: only the bytes the page shows cross the network.

:class:`RangeSource` is a :class:`~shardstream.indexed.ByteSource` over HTTP(S) ``Range`` requests: with the
shard's index (its sidecar ``NAME.tar.ssidx`` next to it, or the index a dataset JSON names), the viewer reads
a field with one request for its bytes instead of downloading the shard. Reads go by aligned blocks
(``block`` bytes, 64 KiB by default) kept in a small in-memory cache (``cache_bytes``), so the fields of one
sample and neighbouring samples share requests. Every answer must be ``206`` with the asked ``Content-Range``
and the same total size and ``ETag`` as the first one (a shard replaced on the server is an error, not a mix
of two files); no more than the bytes asked for is read from an answer (a server that ignores ``Range`` and
sends the whole shard is an error after its headers, not a download). Redirects are followed (credentials stay
with the first host); failed requests are retried twice.

A shard that is compressed, has no index, or is on another scheme (``s3://``...) is downloaded into the shard
cache as before (:mod:`.opening`).
"""

from __future__ import annotations

import base64
import http.client
import threading
from collections import OrderedDict
from urllib.parse import urljoin, urlsplit

from ..errors import OpenError
from ..io.content_range import parse_content_range
from ..io.http import redact

__all__ = ["RangeSource", "ranged"]

def ranged(url: str) -> bool:
    """Whether ``url`` can be read by :class:`RangeSource` (``http://`` and ``https://``)."""
    return urlsplit(url).scheme.lower() in ("http", "https")


class RangeSource:
    """Reads at offsets of an HTTP(S) object with ``Range`` requests (see the module docstring)."""

    def __init__(self, url: str, *, block: int = 64 << 10, cache_bytes: int = 16 << 20, timeout: float = 60):
        self.url, self.block, self.timeout = url, block, timeout
        self.name = redact(url)  # what messages call it: never its password
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._max_blocks = max(1, cache_bytes // block)
        self._lock = threading.Lock()
        self.requests = 0  #: requests sent
        self.fetched = 0  #: body bytes received
        self.etag: str | None = None
        self.size = -1
        self._fetch(0, 1)  # learns the size (and the validator) with a one-byte request

    def _request(self, url: str, start: int, stop: int, redirects: int = 5) -> tuple[bytes, int]:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - a port that is no number raises here
        except ValueError:
            raise OpenError(f"{self.name!r}: redirected to a malformed URL {redact(url)!r}", url=self.name) from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise OpenError(f"{self.name!r}: redirected to {redact(url)!r}, which is not an http(s) URL with a host",
                            url=self.name)
        cls = http.client.HTTPSConnection if parts.scheme.lower() == "https" else http.client.HTTPConnection
        headers = {"Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity", "User-Agent": "shardstream"}
        if parts.username is not None and url == self.url:
            cred = f"{parts.username}:{parts.password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(cred).decode()
        conn = cls(parts.hostname or "", parts.port, timeout=self.timeout)
        try:
            conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), headers=headers)
            resp = conn.getresponse()
            self.requests += 1
            if resp.status in (301, 302, 303, 307, 308) and resp.getheader("Location") and redirects:
                location = resp.getheader("Location") or ""
                try:
                    target = urljoin(url, location)
                except ValueError:
                    raise OpenError(f"{self.name!r}: redirected to a malformed URL {redact(location)!r}",
                                    url=self.name) from None
                return self._request(target, start, stop, redirects - 1)
            if resp.status != 206:  # its body (maybe the whole shard) is never read: the connection is closed
                raise OpenError(f"{self.name!r}: the server answered {resp.status} to a range request (the viewer "
                                "needs Range support to read a shard without downloading it)", url=self.name)
            body = resp.read(stop - start)  # no more than asked, whatever the server sends
            self.fetched += len(body)
        finally:
            conn.close()
        try:
            first, last, total = parse_content_range(resp.getheader("Content-Range", ""))
        except ValueError as e:
            raise OpenError(f"{self.name!r}: {e} (asked for bytes {start}-{stop - 1})", url=self.name) from None
        if first != start or len(body) != last - start + 1:
            raise OpenError(f"{self.name!r}: bad Content-Range {resp.getheader('Content-Range')!r} for bytes "
                            f"{start}-{stop - 1} ({len(body)} bytes received)", url=self.name)
        if total is None:
            raise OpenError(f"{self.name!r}: the server does not state the shard's size (Content-Range "
                            f"{resp.getheader('Content-Range')!r}); the viewer needs it to read the shard in place",
                            url=self.name)
        etag = resp.getheader("ETag")
        if self.size >= 0 and (total != self.size or (self.etag and etag and etag != self.etag)):
            raise OpenError(f"{self.name!r} changed on the server while it was being viewed; reopen the viewer",
                            url=self.name)
        self.etag = self.etag or etag
        return body, total

    def _fetch(self, start: int, stop: int) -> bytes:
        for attempt in range(3):
            try:
                body, total = self._request(self.url, start, stop)
                break
            except OpenError:
                raise
            except (OSError, http.client.HTTPException) as e:
                if attempt == 2:
                    raise OpenError(f"{self.name!r}: {e}", url=self.name) from e
        if self.size < 0:
            self.size = total
        return body

    def _block(self, number: int) -> bytes:
        with self._lock:
            data = self._cache.get(number)
            if data is not None:
                self._cache.move_to_end(number)
                return data
        start = number * self.block
        data = self._fetch(start, min(self.size, start + self.block))
        with self._lock:
            self._cache[number] = data
            while len(self._cache) > self._max_blocks:
                self._cache.popitem(last=False)
        return data

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` (fewer at the end of the object)."""
        size = max(0, min(size, self.size - offset))
        if size == 0:
            return b""
        if size > 4 * self.block:  # a large field: one request, not cached
            return self._fetch(offset, offset + size)
        first, last = offset // self.block, (offset + size - 1) // self.block
        data = b"".join(self._block(n) for n in range(first, last + 1))
        skip = offset - first * self.block
        return data[skip : skip + size]

    view = read

    def close(self) -> None:
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return f"RangeSource({self.name!r}, size={self.size}, requests={self.requests}, fetched={self.fetched})"
