"""``http://`` and ``https://`` shards: a native streaming client that survives broken connections.

:class:`HttpStream` reads a shard with one GET and hands its body to the tar reader in large reads. When the
connection breaks (reset, timeout, a body shorter than its ``Content-Length``) or the server answers 5xx, 408 or
429, it waits (exponential backoff with jitter, ``Retry-After`` honoured) and goes on with a ``Range: bytes=N-``
request from the exact byte offset it had reached, so the bytes read are identical to an uninterrupted read:

- a ``206`` answer must start at that offset (``Content-Range``) and have the same total size;
- a server that ignores ``Range`` (``200``) is read again from the start, skipping the bytes already delivered;
- the ``ETag`` / ``Last-Modified`` of every answer must match the first one: an object replaced mid-read is an
  :class:`~shardstream.errors.OpenError`, never a shard spliced from two versions;
- a body that stays short of its ``Content-Length`` after all retries is an ``OpenError``, never a short shard.

A stream can also read one byte range ``[start, end)`` of an object (``Range: bytes=start-(end-1)``): the
parallel reader :mod:`shardstream.io.ranged` reads a shard as such parts, over kept-alive connections from a
:class:`ConnectionPool`, each part with the same retries, exact resume and validator checks.

Proxies: ``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` (read by :mod:`shardstream.config`) send requests through a
forwarding proxy (``CONNECT`` tunnels for https); see :mod:`shardstream.io.proxy`.

Retries count failures since the last byte received (``SHARDSTREAM_HTTP_RETRIES``, default 5); every stream
also has a hard cap on requests. Extra headers come from ``SHARDSTREAM_HTTP_HEADERS`` and from the storage
settings of the URL's prefix (:mod:`shardstream.io.storage_config`); ``https://user:password@host/`` sends Basic
authentication (the password never appears in messages); where redirects and credentials may go is
:mod:`shardstream.io.redirects`.

>>> split_status_line("bytes 100-199/1000")
(100, 1000)
>>> redact("https://user:secret@host/a.tar")
'https://user:***@host/a.tar'
"""

from __future__ import annotations

import base64
import http.client
import io
import random
import socket
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError, OpenError
from ..redact import redact, redacting_logger
from .content_range import RangeIgnored, RangeNotSatisfiable, parse_content_range, split_status_line, unsatisfied_total
from .proxy import ConnectionPool, Route
from .redirects import may_keep_credentials, origin, redirect_target

__all__ = ["ConnectionPool", "HttpStream", "RangeIgnored", "RangeNotSatisfiable", "parse_content_range", "redact",
           "split_status_line"]

log = redacting_logger(__name__)

_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
_REDIRECTS = {301, 302, 303, 307, 308}
_MAX_BACKOFF = 30.0
_MAX_REQUESTS = 1000  # hard cap per stream, whatever the progress: bounded request loops
_SKIP_CHUNK = 1 << 20
_MAX_DRAIN = 16 << 20


class _Retry(Exception):
    """Internal: this attempt failed in a way worth retrying."""


def _digits(value: str | None) -> int | None:
    """A header's decimal number (ASCII digits only: ``Content-Length``, ``Retry-After``), else None."""
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 19:
        return None
    return int(value)


class HttpStream(io.RawIOBase):
    """One HTTP(S) shard as a readable binary stream (see the module docstring).

    ``size`` is the length announced by the server (None when it sent none), ``etag`` and ``last_modified``
    its validators, ``md5`` the hex digest from a ``Content-MD5`` header when there is one (the shard cache
    verifies it). ``sleep`` is the function used to wait between retries (tests pass a fake clock); ``name`` is
    what error messages call the shard (e.g. the ``s3://`` URL of a presigned URL).

    ``start``/``end`` read the part ``[start, end)`` only (``end`` None: to the end of the object); ``ranged``
    tells whether the server answered with a range (206). A 206 answer that does not state the object's size
    (``Content-Range: bytes 0-1048575/*``) ends the stream at the end of its range (``last``: one past its last
    byte), which may come before ``end`` (the object ends there). ``pool`` lends kept-alive connections;
    ``route`` says which proxy to use (default: none). ``final_url`` is the URL after redirects. ``on_open(stream)``
    is called before the first request, ``on_sent()`` once it is sent (its answer on its way). ``ranged_only``:
    a first answer of 200 to a request from ``start`` > 0 is not read from byte 0 and skipped, but closed unread
    (:class:`RangeIgnored`).
    """

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, retries: int = 5,
                 timeout: float = 60, backoff: float = 0.5, max_redirects: int = 8,
                 sleep: Callable[[float], None] = time.sleep, name: str | None = None, start: int = 0,
                 end: int | None = None, pool: ConnectionPool | None = None, route: Route | None = None,
                 on_open: Callable[[HttpStream], None] | None = None, on_sent: Callable[[], None] | None = None,
                 ranged_only: bool = False):
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{name or redact(url)!r} is not an http:// or https:// URL with a host")
        try:
            self._home = origin(parts)
        except ValueError:
            raise ConfigError(f"{name or redact(url)!r}: the port is not a number") from None
        self.url, self.name = url, name or redact(url)  # name: what messages show (never a signature)
        self.headers = {"User-Agent": "shardstream", "Accept-Encoding": "identity", **(headers or {})}
        if parts.username is not None and not any(k.lower() == "authorization" for k in self.headers):
            cred = f"{parts.username}:{parts.password or ''}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(cred).decode()
        self.retries, self.timeout, self.backoff, self.max_redirects = retries, timeout, backoff, max_redirects
        self._sleep = sleep
        self._first = True  # the next good answer is the first one: it sets size and validators
        self.start, self.end, self.pool, self.route = start, end, pool, route or Route()
        self.ranged_only = ranged_only
        self.final_url, self.ranged = url, False
        self.pos = start
        self.size: int | None = None
        self.etag: str | None = None
        self.last_modified: str | None = None
        self.md5: str | None = None
        self.last: int | None = None  # size unknown: one past the last byte the latest 206 answer covers
        self.requests = 0  #: requests sent so far (first one included)
        self.resumes = 0  #: times the body was resumed after a failure
        self._failures = 0  # failures since the last progress
        self._conn: http.client.HTTPConnection | None = None
        self._resp: http.client.HTTPResponse | None = None
        self._aborted = False
        self._on_sent = on_sent
        if on_open is not None:
            on_open(self)  # before the first request: its owner may abort it from now on
        self._connect()

    # -- requests -------------------------------------------------------------------------------------------

    def _error(self, problem: str, cause: BaseException | None = None) -> OpenError:
        err = OpenError(f"{self.name!r}: {problem}", url=self.name)
        err.__cause__ = cause
        return err

    def _send(self, url: str, start: int) -> http.client.HTTPResponse:
        parts = urlsplit(url)
        headers = dict(self.headers)
        if not may_keep_credentials(self._home, origin(parts)):  # redirected elsewhere: keep credentials home
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        if start > 0 or self.end is not None:
            headers["Range"] = f"bytes={start}-{'' if self.end is None else self.end - 1}"
        target, key, make = self.route.connection_for(parts, self.timeout)
        self.requests += 1
        self._key = key
        reused = self.pool.take(key) if self.pool is not None else None
        if reused is not None:  # a kept-alive connection the server may have closed since: one free retry
            self._conn = reused
            self._check_aborted()
            try:
                reused.request("GET", target, headers=headers)
                self._sent()
                return reused.getresponse()
            except (OSError, http.client.HTTPException) as e:
                log.debug("%s: a kept-alive connection failed (%s: %s); sending the request on a new one",
                          self.name, type(e).__name__, e)
                self._close_conn()
        self._conn = conn = make()
        self._check_aborted()
        conn.request("GET", target, headers=headers)
        self._sent()
        return conn.getresponse()

    def _sent(self) -> None:
        hook, self._on_sent = self._on_sent, None
        if hook is not None:
            hook()

    def _connect(self) -> None:
        """Send a request for the bytes from ``self.pos`` on until one answers; retries what is retryable."""
        if self.pos > self.start:
            log.info("%s: resuming at byte %d%s", self.name, self.pos, self._where())
        while True:
            try:
                self._resp = self._open_at(self.pos)
                return
            except OpenError:  # permanent: 4xx, a changed object, too many redirects
                self._close_conn()
                raise
            except _Retry as e:
                self._close_conn()
                self._wait(e, str(e))
            except (OSError, http.client.HTTPException) as e:
                self._close_conn()
                self._wait(e, f"{type(e).__name__}: {e}")

    def _open_at(self, start: int) -> http.client.HTTPResponse:
        url = self.url
        for _ in range(self.max_redirects + 1):
            resp = self._send(url, start)
            if resp.status not in _REDIRECTS:
                break
            location = resp.getheader("Location")
            resp.close()
            self._close_conn()
            if not location:
                raise self._error(f"redirect {resp.status} without a Location header")
            url = redirect_target(url, location, self.name)
        else:
            raise self._error(f"more than {self.max_redirects} redirects")
        self.final_url = url
        if resp.status == 416:
            resp.read(64 << 10)
            total = unsatisfied_total(resp.getheader("Content-Range"))
            raise RangeNotSatisfiable(f"{self.name!r}: no bytes from {start} on (HTTP 416)", self.name, total)
        if resp.status in _RETRY_STATUS:
            resp.read(64 << 10)
            err = _Retry(f"HTTP {resp.status} {resp.reason}")
            err.retry_after = _digits(resp.getheader("Retry-After"))  # type: ignore[attr-defined]
            raise err
        if resp.status not in (200, 206):
            body = " ".join(resp.read(1000).decode("utf-8", "replace").split())[:200]
            raise self._error(f"HTTP {resp.status} {resp.reason}" + (f": {body}" if body else ""))
        if resp.status == 200 and start > 0 and self.ranged_only and self._first:
            raise RangeIgnored(f"{self.name!r}: the server ignores Range (200 for bytes {start}-); closed unread",
                               url=self.name)  # _connect closes the connection: nothing of the body is read
        self._check_validators(resp)
        if resp.status == 206:
            try:
                first, last, total = parse_content_range(resp.getheader("Content-Range", ""))
            except ValueError as e:  # a header block cut short by a dropped connection reads the same: retried
                raise http.client.HTTPException(f"a 206 answer without a valid Content-Range ({e})") from None
            if first != start:
                raise self._error(f"asked for bytes from {start}, the server sent bytes from {first}")
            self.ranged = True
            self._check_size(total)
            self.last = last + 1 if total is None else None
            return resp
        self.last = None
        length = resp.getheader("Content-Length")
        size = _digits(length)
        if length is not None and size is None and resp.chunked is False:
            raise self._error(f"the server sent an invalid Content-Length {length[:40]!r}")
        self._check_size(size if resp.chunked is False else None)
        if start > 0:  # the server ignored Range: read again from 0 and skip what was delivered already
            log.info("%s: the server ignores Range (200 for bytes %d-): reading from byte 0, skipping %d bytes",
                     self.name, start, start)
            self._skip(resp, start)
        return resp

    def _check_validators(self, resp: http.client.HTTPResponse) -> None:
        etag, modified = resp.getheader("ETag"), resp.getheader("Last-Modified")
        if self._first:
            self.etag, self.last_modified = etag, modified
            md5 = resp.getheader("Content-MD5")
            try:
                self.md5 = base64.b64decode(md5, validate=True).hex() if md5 else None
            except ValueError:
                self.md5 = None
            return
        if (self.etag and etag and etag != self.etag) or (
            self.last_modified and modified and modified != self.last_modified
        ):
            raise self._error(f"the object changed while it was being read (ETag {self.etag} -> {etag}, "
                              f"Last-Modified {self.last_modified} -> {modified}); read it again")

    def _check_size(self, total: int | None) -> None:
        if self._first:
            self.size, self._first = total, False
        elif total is not None and self.size is not None and total != self.size:
            raise self._error(f"the object changed while it was being read (size {self.size} -> {total})")

    def _skip(self, resp: http.client.HTTPResponse, count: int) -> None:
        while count > 0:
            chunk = resp.read(min(count, _SKIP_CHUNK))
            if not chunk:
                raise _Retry(f"the body ended while skipping to byte {self.pos} (the server ignores Range)")
            count -= len(chunk)

    def _wait(self, cause: BaseException, what: str) -> None:
        self._failures += 1
        if self._failures > self.retries or self.requests >= _MAX_REQUESTS:
            at = f" at byte {self.pos}" + (f" of {self.size}" if self.size is not None else "")
            raise self._error(f"{what}{at}; gave up after {self._failures - 1} retries", cause)
        delay = min(_MAX_BACKOFF, self.backoff * 2 ** (self._failures - 1)) * random.uniform(0.5, 1.0)
        retry_after = getattr(cause, "retry_after", None)
        if retry_after is not None:
            delay = max(delay, min(float(retry_after), _MAX_BACKOFF))
        log.info("%s: %s at byte %d%s; retry %d of %d in %.2f s", self.name, what, self.pos, self._where(),
                 self._failures, self.retries, delay)
        self._sleep(delay)

    def _where(self) -> str:
        """What a record adds to a byte offset: the part this stream reads (a ranged read), or the size."""
        if self.end is not None or self.start:
            return f" (part: bytes {self.start}-{'' if self.end is None else self.end - 1})"
        return f" of {self.size}" if self.size is not None else ""

    def _limit(self) -> int | None:
        """Where this stream ends: its part's end, the object's size, or (size unknown: ``*`` in
        ``Content-Range``) the end of the range the server answered with, whichever comes first."""
        ends = [end for end in (self.end, self.size if self.size is not None else self.last) if end is not None]
        return min(ends) if ends else None

    def release(self) -> None:
        """Give the connection back to the pool if its answer was read to the end (else close it)."""
        resp, conn, key = self._resp, self._conn, getattr(self, "_key", None)
        if resp is not None and not resp.isclosed() and resp.length == 0:
            resp.read()  # read1 leaves an answer read to its last byte open: this ends it (nothing is read)
        if (self.pool is not None and resp is not None and conn is not None and key is not None
                and resp.isclosed() and not resp.will_close):
            self._resp = self._conn = None
            self.pool.give(key, conn)
        self._close_conn()

    def abort(self) -> None:
        """From another thread: end the request or read under way at once (its socket is shut down) and send no
        other; the thread reading gets an OpenError, or an OSError that its retry rule turns into one."""
        self._aborted = True
        sock = getattr(self._conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _check_aborted(self) -> None:
        if self._aborted:
            self._close_conn()
            raise self._error("closed")

    def _close_conn(self) -> None:
        resp, conn, self._resp, self._conn = self._resp, self._conn, None, None
        for thing in (resp, conn):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # pragma: no cover - closing a broken socket
                    pass

    # -- reading --------------------------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def _next(self, read: Callable[[http.client.HTTPResponse, int], bytes | int], size: int) -> bytes | int:
        """One read of up to ``size`` bytes (``read(resp, size)`` gives bytes or a count), resuming after failures."""
        if self.closed:
            raise ValueError("read from a closed HttpStream")
        while size:
            limit = self._limit()
            if limit is not None and self.pos >= limit:
                break
            if self._resp is None:
                self.resumes += 1
                self._connect()
            if limit is not None:
                size = min(size, limit - self.pos)  # a part never reads past its end (a 200 answer goes on)
            try:
                got = read(self._resp, size)  # type: ignore[arg-type]
            except (OSError, http.client.HTTPException) as e:
                self._close_conn()
                self._wait(e, f"connection broken ({type(e).__name__}: {e})")
                continue
            n = got if isinstance(got, int) else len(got)
            if n:
                self.pos += n
                self._failures = 0
                return got
            if limit is None:
                break  # no length announced: the end of the body is the end of the shard
            self._close_conn()
            self._wait(EOFError(), f"the body ended after {self.pos} of {limit} bytes (Content-Length)")
        return 0

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(b).cast("B")
        return self._next(lambda resp, n: resp.readinto(view[:n]), len(view))  # type: ignore[return-value]

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes as they arrive (one copy: socket to bytes); all that is left for -1."""
        if size is None or size < 0:
            return self.readall()
        got = self._next(lambda resp, n: resp.read1(n), size)
        return got if isinstance(got, bytes) else b""

    def finish(self) -> None:
        """The reader is done: read what is left (a tar reader stops at the end-of-archive blocks, before the
        padding) so that a body short of its ``Content-Length`` is an OpenError here too. Skipped beyond 16 MiB."""
        if self.size is not None and 0 < self.size - self.pos <= _MAX_DRAIN:
            buf = bytearray(min(_SKIP_CHUNK, self.size - self.pos))
            while self.readinto(buf):
                pass

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        self._close_conn()
        super().close()

    def __repr__(self) -> str:
        return f"HttpStream({self.name!r}, pos={self.pos}, size={self.size})"
