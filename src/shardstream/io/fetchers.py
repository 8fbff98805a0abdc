"""The fetch threads, kept-alive connections and read-ahead budget of a process, shared by its ranged reads.

A process (or each DataLoader worker: :func:`share` divides the budgets by their number) has one set of fetch
threads, one per connection of its budget, which run the part requests of every open shard in priority order
(older shards first, then by offset). A forked child starts with none of its parent's threads or state. The
threads are started with the first task, by a thread of their own: the first shard's first request (sent by the
reader's thread) goes out at once, not after a dozen thread starts (each waits to be scheduled: 20 ms for 15 on a
busy 2-core machine), and the threads are up by the time its answer tells the size.

The first object of a server (:meth:`Fetchers.first_visit`: once per server and process) has its next parts
requested blind, with its first request (:mod:`shardstream.io.ranged`), each on a connection of its own. Where no
part is planned, connections are kept warm instead: the fetch threads open them (TCP, and TLS for https) and
leave them in the pool, and the parts planned when the first answer comes go out on them instead of paying a
handshake (one round trip, two or three with TLS) each. A connection that fails to open is left out; the part
that would have used it opens its own and reports.

>>> share(16, 256 << 20, 8 << 20, workers=4)
(4, 67108864)
>>> share(16, 256 << 20, 8 << 20, workers=16)
(2, 16777216)
"""

from __future__ import annotations

import functools
import heapq
import http.client
import itertools
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..redact import redacting_logger
from .proxy import ConnectionPool

log = redacting_logger(__name__)

_WARM_TIMEOUT = 10.0  # the most a fetch thread waits for a connection it opens ahead

__all__ = ["Fetchers", "fetchers", "share", "worker_count"]


def worker_count() -> int:
    """The number of DataLoader workers when called in one (torch already imported), else 1."""
    torch = sys.modules.get("torch")
    if torch is None:
        return 1
    try:
        info = torch.utils.data.get_worker_info()
    except AttributeError:  # pragma: no cover - a partial torch
        return 1
    return max(1, info.num_workers) if info is not None else 1


def share(connections: int, readahead: int, part_size: int, workers: int | None = None) -> tuple[int, int]:
    """``(connections, read-ahead bytes)`` of one process among ``workers`` (default: :func:`worker_count`)."""
    workers = worker_count() if workers is None else max(1, workers)
    if connections <= 1:
        return 1, readahead
    return max(2, connections // workers), max(2 * part_size, readahead // workers)


class Fetchers:
    """The fetch threads and connections of a process: tasks run in (priority, arrival) order."""

    def __init__(self, threads: int):
        self.pool = ConnectionPool()
        self._tasks: list[tuple[tuple[int, int], int, Callable[[], None]]] = []
        self._cond = threading.Condition()
        self._arrival = itertools.count()
        self.budget = 0  # read-ahead bytes reserved, all streams together
        self._visited: set[tuple[Any, ...]] = set()  # the pool keys of the servers seen already
        self._threads = threads  # started with the first task (0 once started)

    def _start(self, threads: int) -> None:
        """Start the fetch threads (on a thread of its own: the caller does not wait for them)."""
        for i in range(threads):
            threading.Thread(target=self._run, name=f"shardstream-part-{i}", daemon=True).start()

    def submit(self, priority: tuple[int, int], task: Callable[[], None], reserve: int = 0) -> None:
        """Run ``task`` on a fetch thread (lowest ``priority`` first), ``reserve`` bytes taken from the budget."""
        with self._cond:
            self.budget += reserve
            heapq.heappush(self._tasks, (priority, next(self._arrival), task))
            self._cond.notify()
            threads, self._threads = self._threads, 0
        if threads:
            threading.Thread(target=self._start, args=(threads,), name="shardstream-part-start", daemon=True).start()

    def first_visit(self, key: tuple[Any, ...]) -> bool:
        """True the first time this process asks about the server of pool ``key``, False ever after."""
        with self._cond:
            if key in self._visited:
                return False
            self._visited.add(key)
            return True

    def warm(self, key: tuple[Any, ...], make: Callable[[], Any], count: int, priority: tuple[int, int]) -> None:
        """Open ``count`` connections for the pool ``key`` on the fetch threads (``make()`` makes one): they wait in
        the pool for the parts of the first object."""
        for _ in range(count):
            self.submit(priority, functools.partial(self._open, key, make))

    def _open(self, key: tuple[Any, ...], make: Callable[[], Any]) -> None:
        conn = make()
        timeout, conn.timeout = conn.timeout, min(conn.timeout or _WARM_TIMEOUT, _WARM_TIMEOUT)
        try:
            conn.connect()
            conn.sock.settimeout(timeout)
        except (OSError, http.client.HTTPException) as e:
            log.debug("a connection opened ahead to %s:%s failed: %s: %s", key[1], key[2], type(e).__name__, e)
            conn.close()
            return
        conn.timeout = timeout
        self.pool.give(key, conn)

    def free(self, reserved: int) -> None:
        """Give ``reserved`` bytes back to the budget."""
        with self._cond:
            self.budget -= reserved

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._tasks:
                    self._cond.wait()
                task = heapq.heappop(self._tasks)[2]
            task()


_FETCHERS: dict[tuple[int, int], Fetchers] = {}
_FETCHERS_LOCK = threading.Lock()


def _after_fork() -> None:
    """A forked child (a DataLoader worker) has none of the parent's fetch threads, and maybe a held lock."""
    global _FETCHERS_LOCK
    _FETCHERS_LOCK = threading.Lock()
    _FETCHERS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def fetchers(threads: int) -> Fetchers:
    """This process's fetchers (a forked DataLoader worker makes its own: threads do not survive a fork)."""
    key = (os.getpid(), threads)
    with _FETCHERS_LOCK:
        if key not in _FETCHERS:
            _FETCHERS[key] = Fetchers(threads)
        return _FETCHERS[key]
