"""Remote shards at line rate: one shard read as parallel ranged GETs, handed to the reader in order.

One TCP stream over a long link delivers at most window / RTT, however fast the link; ``gsutil -m``, s5cmd and
AIStore fill a link with several connections at once. :class:`RangedStream` does the same for every
``http(s)://``, ``s3://`` (a signed URL) and ``ais://`` shard that a reader opens (WebDataset, the CLI, the
training modes, the shard cache's downloads):

- the first part (``Range: bytes=0-``\\ *1 MiB*\\ ``-1``) is opened at once and its bytes are handed to the
  reader as they arrive, so the first sample comes after one round trip plus its own bytes;
- the next parts go out with it over other connections (kept alive, shared by the process:
  :mod:`shardstream.io.fetchers`), at most ``readahead`` bytes ahead of the reader: planned on the size of the
  server's previous shard or, for a server's first object in this process, *blind* (``connections - 1`` at
  most): one past the end gets a 416 and is dropped, one answered 200 (``Range`` ignored) is closed unread, one
  that fails is asked again once the first answer is in; the size comes from whichever answer lands first, and
  the other parts go out then. Parts start small and grow
  (1 MiB up to offset 8 MiB, then a quarter of the offset in whole MiBs, up to the part size), and shrink
  again towards the end (at most a quarter of what is left): the first bytes of a shard (its first samples)
  and its last ones come over several connections at once rather than queued behind one big part at one
  connection's rate, and the parts in between are big (few requests);
- each part is an :class:`~shardstream.io.http.HttpStream` of its byte range: retried, resumed with ``Range``
  from the exact byte it reached, and its ``ETag``/``Last-Modified``/size must be those of the first answer (an
  object replaced mid-read is an OpenError, never a spliced shard); the reader gets the bytes in order;
- a server that ignores ``Range`` (200) is read through that first answer, as one stream, held to one part of
  bytes ahead of the reader (it waits for the reader, never buffers the shard); the parts planned on a guess are
  dropped (their bytes would come twice). A part answered 200 after a first answer of 206 (read from byte 0 and
  skipped to its start) reads on to the end of the shard and the parts after it are dropped: the shard crosses
  the network at most about twice, not once per part;
- an object whose size the server does not state (``Content-Range: bytes 0-1048575/*``) is read on with
  ``Range: bytes=N-`` after the first part until an answer stops short of what it asked for, a 416 says nothing
  is left or a whole body (200) comes: never cut at the end of its first part.

Budgets (:mod:`shardstream.config`): ``SHARDSTREAM_HTTP_CONNECTIONS`` (16) connections and
``SHARDSTREAM_HTTP_READAHEAD`` (256 MiB) of parts read ahead, per process; in a DataLoader worker, each worker
gets ``1/num_workers`` of both (at least 2 connections and 2 parts), so 8 workers open about as many connections
as one process would. Memory: at most the read-ahead budget, plus one part (``SHARDSTREAM_HTTP_PART_SIZE``,
8 MiB) per shard open at the same time, whatever the server does (``buffered`` and ``most_buffered`` count the
bytes received and not yet read, now and at most). ``SHARDSTREAM_HTTP_CONNECTIONS=1`` reads each shard through
one stream.

>>> RangedStream.__name__, share(16, 256 << 20, 8 << 20, workers=2)
('RangedStream', (8, 134217728))
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..errors import OpenError
from ..redact import redacting_logger
from .fetchers import fetchers, share, worker_count
from .http import HttpStream, RangeNotSatisfiable
from .inorder import InOrder
from .parts import Part, differs, fit, span
from .prefetch import tentative
from .proxy import Route

__all__ = ["RangedStream", "share", "worker_count"]

log = redacting_logger(__name__)

_CHUNK = 256 << 10  # the most one read from a socket hands over
_SERIAL = itertools.count()
_LAST_SIZE: dict[tuple[str, str, int | None], int] = {}  # server -> size of its last ranged object (a hint)


class RangedStream(InOrder):
    """A shard read as parallel ranged GETs, in order (see the module docstring); the reader's side (``read``,
    ``readinto``, ``finish``, ``close``) is :class:`~shardstream.io.inorder.InOrder`'s.

    ``size``, ``etag``, ``last_modified`` and ``md5`` are those of the first answer (``md5`` only when it covers
    the whole object); ``requests`` counts the requests sent, ``parallel`` tells whether parts were used.
    """

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, retries: int = 5,
                 timeout: float = 60, backoff: float = 0.5, name: str | None = None, connections: int = 16,
                 readahead: int = 256 << 20, part_size: int = 8 << 20, route: Route | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        super().__init__(name or url, part_size=max(64 << 10, part_size))  # the fetchers' lock is taken inside _cond
        self.readahead = max(self.part_size, readahead)
        self.connections = max(1, connections)
        self._fetch = fetchers(max(1, connections - 1))  # and the first part has a thread of its own
        self._options: dict[str, Any] = {"headers": headers, "retries": retries, "timeout": timeout, "backoff": backoff,
                         "sleep": functools.partial(self._nap, sleep), "pool": self._fetch.pool, "route": route}
        self._serial = next(_SERIAL)
        parts = urlsplit(url)
        self._server = (parts.scheme.lower(), parts.hostname or "", parts.port)
        self._held = tentative()  # a first guess of the prefetcher: its first part only, until it is read
        self._planned = 0  # where the next part starts
        self.requests = self.resumes = 0
        self._whole = False  # a part reads on to the end of the object: no other part is planned
        self._open_ended = False  # the server states no size: the object is read on until it ends
        self.parallel = False
        self.when_planned: Callable[[], None] | None = None  # called once every part has been requested
        self.when_fetched: Callable[[], None] | None = None  # called once every part has been received
        self.url, self.final_url = url, url
        self.etag: str | None = None
        self.last_modified: str | None = None
        self._known = False  # the first answer is in: size and validators are the object's
        guess = _LAST_SIZE.get(self._server, 0)
        self.size: int | None = guess or None  # a guess until the first answer
        if guess:
            self.part_size = fit(guess, self.connections, self.part_size)
        blind = None
        if not guess and self.connections > 1:  # a server not seen before: its next parts go out with the first
            _, key, make = (route or Route()).connection_for(parts, timeout)
            if self._fetch.first_visit(key):
                blind = functools.partial(self._blind, key, make)
        with self._cond:
            first = self._add_part(0, span(0, self.part_size))
            if guess:
                self._plan()  # the next parts go out with the first, on the strength of the last shard's size
        try:
            s = HttpStream(url, start=0, end=first.end, name=name, on_open=functools.partial(self._opened, first),
                           on_sent=blind, **self._options)
        except BaseException:
            self.close()
            raise
        self.name, self.final_url = s.name, s.final_url
        self.size, self.etag, self.last_modified = s.size, s.etag, s.last_modified
        self.md5 = s.md5 if (not s.ranged or (s.size is not None and s.size <= first.end)) else None
        with self._cond:
            self._known = True
            if not s.ranged:  # a whole body: this one answer is the shard
                self._read_on(first, s)
                _LAST_SIZE.pop(self._server, None)
            elif s.size is None:  # a range of an object of unknown size: read on until the server says it ends
                self._open_ended = self._whole = True
                self._drop_after(first)
                _LAST_SIZE.pop(self._server, None)
            else:
                first.end = min(first.end, s.size)
                if s.size > first.end:
                    _LAST_SIZE[self._server] = s.size
                    if not guess:
                        self.part_size = fit(s.size, self.connections, self.part_size)
            for part in self._parts:  # the parts that answered before this one
                if part.seen is not None and part.error is None:
                    changed = differs(self, part.seen)
                    if changed:
                        part.error = self._changed(changed)
                part.seen = None
            self._trim()
            for part in self._parts:  # blind parts that failed before it: trimmed, dropped or requested again
                if part.missed is not None:
                    part.missed = None
                    self._again(part)
            self.parallel = self.parallel or any(part.end > part.start for part in self._parts[1:])
            self._plan()
        self._own_thread(self._pump, first, s)

    # -- planning (under the lock) ---------------------------------------------------------------------------

    def _add_part(self, start: int, end: int) -> Part:
        part = Part(len(self._parts), start, end)
        self._parts.append(part)
        self._planned = part.end
        return part

    def _blind(self, key: tuple[Any, ...], make: Callable[[], Any]) -> None:
        """The first request to a server not seen before in this process is on its way: the next parts
        (``connections - 1`` at most, of the sizes they start with, within the read-ahead budget) go out now, each
        on a connection of its own, rather than one round trip later when its answer tells the size. Connections
        that no part takes are opened and kept warm. Called once per server and process: after it, the size of the
        server's last object is a hint."""
        count = self.connections - 1
        with self._cond:
            while count and not (self._stopped or self._held):
                cost = span(self._planned, self.part_size)
                if self._fetch.budget + cost > self.readahead:  # read without the lock: a hint
                    break
                part = self._add_part(self._planned, self._planned + cost)
                part.reserved, part.blind = cost, True
                self._fetch.submit((self._serial, part.index), functools.partial(self._get, part), cost)
                count -= 1
        if count:  # after the blind parts: they take no connection opened for the parts after them
            self._fetch.warm(key, make, count, (self._serial, len(self._parts)))

    def _missed(self, part: Part, error: BaseException) -> None:
        """A blind part failed (416: it starts past the end; :class:`~shardstream.io.http.RangeIgnored`: a whole
        body, closed unread; any other error) and nothing of it reached the reader: once the first answer is in,
        it is trimmed (past the end), dropped (the first answer is the whole object) or requested again like any
        other part (its errors are then the reader's)."""
        part.blind, part.stream = False, None
        log.debug("%s: bytes %d-%d, requested before the first answer: %s: %s", self.name, part.start, part.end - 1,
                  type(error).__name__, error)
        if self._known:
            self._again(part)
        elif not part.done:
            part.missed = error

    def _again(self, part: Part) -> None:
        """Request ``part`` again (the first answer is in), unless it is over or past the end (trimmed)."""
        self._trim()
        if not (part.done or self._stopped):
            self._fetch.submit((self._serial, part.index), functools.partial(self._get, part))
        self._cond.notify_all()

    def _read_on(self, part: Part, stream: HttpStream) -> None:
        """``stream`` answered ``part`` with the whole object (200: the server ignores ``Range``): that part reads
        on to the end of the object, held to a part's worth of bytes ahead of the reader; the parts after it
        would repeat those bytes, so they are dropped and no other part is planned."""
        log.info("%s: the server ignores Range (a whole body for bytes %d-): one stream, no parallel parts",
                 self.name, part.start)
        stream.end = None
        part.end = stream.size if stream.size is not None else -1
        part.throttled = self._whole = True
        self._drop_after(part)
        self._planned = part.end

    def _drop_after(self, part: Part) -> None:
        """Stop the parts after ``part`` and forget them (their bytes, their requests, their read-ahead)."""
        for later in self._parts[part.index + 1:]:
            if later.stream is not None:
                later.stream.abort()
            later.stream, later.done, later.error = None, True, None
            self.buffered -= later.clear()
            self._give(later)
        del self._parts[part.index + 1:]
        self._planned = part.end

    def _extend(self, part: Part, stream: HttpStream) -> None:
        """Size unknown: ``part`` (the last one) ended where it was asked to end, so the object may go on: the
        next part asks for the rest (``Range: bytes=N-``), until an answer ends before what it was asked for, a
        416 says nothing is left, or a whole body (200) comes."""
        asked = part.end if part.end >= 0 else None
        full = stream.pos >= asked if asked is not None else stream.pos > part.start
        if not (self._open_ended and stream.ranged and full and part is self._parts[-1]):
            return
        tail = self._add_part(stream.pos, -1)
        tail.throttled = True
        self._own_thread(self._get, tail)  # it waits for the reader: never on a fetch thread other shards need

    def _trim(self) -> None:
        """The size is known: parts planned past the end are empty, the last one ends at the end."""
        if self.size is None:
            return
        for part in self._parts:
            if part.end > self.size and part.index > 0:
                part.end = max(part.start, self.size)
                if part.start >= self.size and not part.done:
                    part.done = True
                    self._give(part)
        self._planned = min(self._planned, self.size)

    def replan(self) -> None:
        """Request the parts that fit in the read-ahead budget now (a stream opened ahead, now read)."""
        with self._cond:
            self._held = False
            self._plan()

    def _plan(self) -> None:
        """Request the parts that fit in the read-ahead budget (the reader's own part always fits)."""
        while (self.size is not None and self._planned < self.size and not self._stopped and not self._held
               and not self._whole):
            ahead = len(self._parts) - self._cur
            cost = min(span(self._planned, self.part_size, self.size), self.size - self._planned)
            if ahead > 0 and self._fetch.budget + cost > self.readahead:  # read without the lock: a hint
                return
            part = self._add_part(self._planned, self._planned + cost)
            part.reserved = part.end - part.start
            if not self.parallel:
                log.debug("%s: %s bytes in parts of %d bytes, up to %d connections", self.name, self.size,
                          self.part_size, self.connections)
            self.parallel = True
            self._fetch.submit((self._serial, part.index), functools.partial(self._get, part), part.reserved)
        hook = self.when_planned
        if hook is not None and self._known and (self.size is None or self._planned >= self.size):
            self.when_planned = None
            hook()

    def _give(self, part: Part) -> None:
        if part.reserved:
            self._fetch.free(part.reserved)
            part.reserved = 0

    # -- fetching (fetch threads) ----------------------------------------------------------------------------

    def _get(self, part: Part) -> None:
        if part.done or self._stopped:
            return
        try:
            stream = HttpStream(self.url, start=part.start, end=part.end if part.end >= 0 else None, name=self.name,
                                on_open=functools.partial(self._opened, part), ranged_only=part.blind,
                                **self._options)
        except RangeNotSatisfiable as e:  # a part planned on a guess, past the end
            with self._cond:
                if part.blind:
                    self._missed(part, e)
                    return
                if self._known and e.total is not None and self.size is not None and e.total != self.size:
                    part.error = self._changed(f"size {self.size} -> {e.total}")
                part.done = True
                self._cond.notify_all()
            return
        except BaseException as e:  # noqa: BLE001 - handed to the reader, which raises it at this part
            with self._cond:
                if part.blind:
                    self._missed(part, e)
                    return
                log.debug("%s: bytes %d-%d failed: %s: %s", self.name, part.start, part.end - 1, type(e).__name__, e)
                part.error, part.done = e, True
                self._cond.notify_all()
            return
        with self._cond:
            changed = differs(self, stream) if self._known else None
            if not self._known:
                part.seen = stream
                if self.size is None and stream.ranged and stream.size is not None:  # a blind part answered first
                    self.size, self.part_size = stream.size, fit(stream.size, self.connections, self.part_size)
                    self._trim()
                    self._plan()
            if changed:
                part.error, part.done = self._changed(changed), True
                self._cond.notify_all()
                stream.close()
                return
            if not stream.ranged and not part.done:  # read from 0 and skipped to its start: it reads on from here
                self._read_on(part, stream)
                self._own_thread(self._pump, part, stream)  # it waits for the reader: the fetch thread goes back
                return
        self._pump(part, stream)

    def _own_thread(self, target: Callable[..., None], part: Part, *args: Any) -> None:
        """Run ``target(part, *args)`` on a thread of its own (a throttled part: it waits for the reader, so it
        must not hold one of the fetch threads that every open shard shares)."""
        threading.Thread(target=target, args=(part, *args), name=f"shardstream-part-{part.index}", daemon=True).start()

    def _opened(self, part: Part, stream: HttpStream) -> None:
        with self._cond:
            part.stream = stream
            if self._stopped:
                stream.abort()

    def _nap(self, sleep: Callable[[float], None], seconds: float) -> None:
        """A part's wait before a retry: none once the stream is closed (its fetch thread is free at once)."""
        if not self._stopped:
            sleep(seconds)
        if self._stopped:
            raise OpenError(f"{self.name!r}: closed", url=self.name)

    def _changed(self, what: str) -> OpenError:
        return OpenError(f"{self.name!r}: the object changed while it was being read ({what}); read it again",
                         url=self.name)

    def _pump(self, part: Part, stream: HttpStream) -> None:
        """Move the part's bytes from its answer to the reader as they arrive (a throttled part waits while a
        part's worth of its bytes is not read yet)."""
        error = None
        try:
            while not self._stopped and not part.done:
                data = stream.read(_CHUNK)
                if not data:
                    break
                with self._cond:
                    if part.done:  # dropped meanwhile
                        break
                    part.add(data)
                    self.buffered += len(data)
                    self.most_buffered = max(self.most_buffered, self.buffered)
                    self._cond.notify_all()
                    while part.throttled and part.buffered >= self.part_size and not (self._stopped or part.done):
                        self._cond.wait()
        except BaseException as e:  # noqa: BLE001 - handed to the reader
            error = e
        fetched = None
        with self._cond:
            self.requests += stream.requests
            self.resumes += stream.resumes
            # a part planned on a guessed size may be answered before the first answer trims it: its own
            # answer states the size, and ending there is complete (a different size is checked as a change)
            # (size unknown: the end of the range its answer covers)
            known = stream.size if stream.size is not None else stream.last
            end = part.end if known is None or part.end < 0 else min(part.end, known)
            if error is None and not self._stopped and end >= 0 and stream.pos < end:
                error = OpenError(f"{self.name!r}: bytes {part.start}-{part.end - 1}: the answer ended at byte "
                                  f"{stream.pos}", url=self.name)
            if not part.done:
                part.error, part.done = error, True
                if error is None and not self._stopped:
                    self._extend(part, stream)
            part.stream = None
            if (self.when_fetched is not None and self.size is not None and self._planned >= self.size
                    and all(p.done for p in self._parts)):
                fetched, self.when_fetched = self.when_fetched, None
            self._cond.notify_all()
        if fetched is not None:
            fetched()
        if error is None:  # kept alive when its answer was read to the end, even if the reader closed meanwhile
            stream.release()
        stream.close()

    def __repr__(self) -> str:
        return f"RangedStream({self.name!r}, pos={self.pos}, size={self.size}, parts={len(self._parts)})"
