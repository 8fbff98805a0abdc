"""Opening the remote shards of a stream-shuffled block ahead of the reader, several at once.

A :class:`~shardstream.training.iterators.StreamReader` reads one block of ``buffer`` samples before it serves
it, and over small shards a block spans many shards (1,000 samples of 4-sample shards: 250 of them). Opened one
after the other, each shard costs at least one round trip before its first byte; but the reader knows every shard
the block reads, in order, before it reads any. :class:`ShardsAhead` opens them ahead in that order, at most
``limit`` at a time: the shards opened ahead and not yet taken by the reader, whether their answer is on its way
or in. Taking one lets the next planned shard go out, so the reader sees a round trip per ``limit`` shards instead
of one per shard. The samples and their order do not change: only when each shard's stream is opened does.

- Only remote shards are opened ahead (a local file, ``file:`` or ``pipe:`` opens in the reader's thread, as
  before). Each is opened by the reader's opener (:func:`~shardstream.io.open_url`, or the shard cache), in a thread
  of the reader's own, telling the prefetcher that no shard follows it (:class:`~shardstream.io.prefetch.Lookahead`):
  nothing else is opened or guessed behind it. The shard cache locks each shard while it downloads it, so a shard
  opened ahead through the cache is downloaded once, by one thread, and the reader waits for that download; no
  lock is held while the reader waits.
- Memory: ``limit`` streams at most, each holding what its first request has received (at most 1 MiB, the first
  part of a ranged read) plus the parts it plans out of the process's read-ahead budget
  (``SHARDSTREAM_HTTP_READAHEAD``, shared by every open stream); through the shard cache, ``limit`` downloads at
  once (to disk). The default ``limit`` is the process's share of ``SHARDSTREAM_HTTP_CONNECTIONS`` (16; in a
  DataLoader worker, 16 / workers, at least 2): never more shards in flight than connections.
- An error opening a shard ahead (a missing object, a refused request) is kept and raised when the reader opens
  that shard, as its own open would have raised it; a shard opened ahead and never read (the reader stopped, or
  read elsewhere) is closed. :meth:`ShardsAhead.close`, or the garbage collector when the reader is dropped,
  closes them all and lets the threads end (those opening a shard end once that open returns).

>>> ahead = ShardsAhead(["https://h/a.tar", "b.tar"], opener=lambda url: url.upper(), limit=4)
>>> ahead.plan([0, 1])  # b.tar is local: opened by the reader, not ahead
>>> ahead.take(1) is None, ahead.opener_for(0)("https://h/a.tar")
(True, 'HTTPS://H/A.TAR')
>>> ahead.close()
"""

from __future__ import annotations

import collections
import functools
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_module
from ..config import get_settings
from ..io import open_url
from ..io.prefetch import Lookahead
from ..io.trust import COMMAND_SCHEMES
from ..io.urls import split_scheme

if TYPE_CHECKING:
    import concurrent.futures

    from ..io import fetchers
else:
    fetchers = lazy_module("shardstream.io.fetchers")  # loads with the HTTP client, in the process that reads

__all__ = ["ShardsAhead", "default_limit"]

_NOT_AHEAD = frozenset({"", "file"}) | COMMAND_SCHEMES  # opened in the reader's thread: no round trip to hide


def default_limit() -> int:
    """The process's share of the HTTP connection budget (``SHARDSTREAM_HTTP_CONNECTIONS``, divided among
    DataLoader workers, at least 2); 1 when the budget is one connection."""
    settings = get_settings()
    if settings.http_connections <= 1:
        return 1
    return fetchers.share(settings.http_connections, settings.http_readahead, settings.http_part_size)[0]


def _close_when_done(future: concurrent.futures.Future[Any]) -> None:
    def close(done: concurrent.futures.Future[Any]) -> None:
        if not done.cancelled() and done.exception() is None:
            done.result().close()

    future.add_done_callback(close)


def _release(pool: concurrent.futures.ThreadPoolExecutor, started: dict[int, Any]) -> None:
    """Close every stream opened ahead and not taken, and let the threads end (also run by the garbage collector:
    it takes no lock but the pool's and the futures' own)."""
    futures = list(started.values())
    started.clear()
    pool.shutdown(wait=False, cancel_futures=True)
    for future in futures:
        _close_when_done(future)


class ShardsAhead:
    """The shards of ``urls`` (by index) that a reader will open, opened ahead, at most ``limit`` at a time (see
    the module docstring). ``opener``: what opens a URL (None: :func:`~shardstream.io.open_url`)."""

    def __init__(self, urls: Sequence[str], opener: Callable[[str], Any] | None = None, limit: int | None = None):
        self.urls, self.opener = urls, opener or open_url
        self._limit = None if limit is None else max(0, int(limit))
        self.enabled = self._limit != 0  # False: plan() opens nothing ahead
        self._pending: collections.deque[int] = collections.deque()  # planned, not yet opened
        self._started: dict[int, concurrent.futures.Future[Any]] = {}  # opened or opening, not taken
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._told = Lookahead()
        self._release: Callable[[], Any] | None = None

    @property
    def limit(self) -> int:
        """The most shards opened ahead and not yet taken (the default is found with the first remote shard)."""
        if self._limit is None:
            self._limit = default_limit()
        return self._limit

    def plan(self, shards: Iterable[int]) -> None:
        """The shards the reader opens next, in the order it opens them: the remote ones are opened ahead. A shard
        opened ahead for an earlier plan and not in this one is closed."""
        wanted = [shard for shard in dict.fromkeys(shards) if split_scheme(self.urls[shard])[0] not in _NOT_AHEAD]
        if not (wanted or self._started) or not self.enabled:
            self._pending.clear()
            return
        keep = set(wanted)
        for shard in [shard for shard in self._started if shard not in keep]:
            _close_when_done(self._started.pop(shard))
        self._pending = collections.deque(shard for shard in wanted if shard not in self._started)
        self.fill()

    def opener_for(self, shard: int) -> Callable[[str], Any]:
        """What the reader opens ``shard`` with: when it opens it (not before), its stream opened ahead if it was
        planned (or the error of that open), else ``opener(url)`` in the reader's thread."""
        return functools.partial(self._open_taken, shard)

    def _open_taken(self, shard: int, url: str) -> Any:
        future = self.take(shard)
        if future is None:
            return self.opener(url)
        try:
            return future.result()
        finally:  # its slot is free once its open is over: the next planned shard goes out
            self.fill()

    def take(self, shard: int) -> concurrent.futures.Future[Any] | None:
        """``shard``'s stream opened ahead (a future: the caller owns the stream), or None (not planned: the
        reader opens it itself). Call :meth:`fill` once the open is over."""
        future = self._started.pop(shard, None)
        if future is None and shard in self._pending:
            self._pending.remove(shard)
        return future

    @property
    def in_flight(self) -> int:
        """Shards opened ahead and not taken (at most ``limit``)."""
        return len(self._started)

    def fill(self) -> None:
        """Open planned shards until ``limit`` are opened ahead (or opening) and not taken."""
        while self._pending and len(self._started) < self.limit:
            shard = self._pending.popleft()
            # opened in a thread of the pool, telling the prefetcher that nothing follows it
            self._started[shard] = self._executor().submit(self._told.open, self.opener, self.urls[shard], None)

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            import concurrent.futures  # noqa: PLC0415 - with the first shard opened ahead

            self._pool = concurrent.futures.ThreadPoolExecutor(self.limit, thread_name_prefix="shardstream-open-ahead")
            self._release = weakref.finalize(self, _release, self._pool, self._started)
        return self._pool

    def close(self) -> None:
        """Close the shards opened ahead and not taken; forget the plan (the threads end once idle)."""
        self._pending.clear()
        if self._release is not None:
            self._release()
        self._pool = self._release = None
