"""Opening the next shard ahead, so that a long link does not idle at every shard boundary.

A reader opens its shards one after the other; without help the opener learns the next URL only when the
previous shard is finished, and every shard boundary costs a round trip plus the ramp-up of its connections.

- **Told, exactly** (every reader of a shard list: ``tarfile_to_samples``, ``WebDataset``, the record and column
  readers, their checkpointed cursors): the reader knows the shard it opens next (whatever the naming, shuffled
  or resampled) and opens the current one through a :class:`Lookahead` (``lookahead.open(opener, url, next)``).
  Once every part of the current shard has been requested, the next one is opened in the background and its
  parts go out as the read-ahead budget allows; the reader's next open gets that stream. At most one shard is
  open ahead per reader; ``lookahead.close()`` (the reader stopped, finished or failed) closes it.
- **Guessed** (a bare :func:`~shardstream.io.open_url` that no reader announced, e.g. user code looping over
  numbered URLs): when the last two shards this process opened from one numbered series differ by a stride, the
  shard one stride further is opened ahead; after the first shard of a series the guess is the shard
  ``num_workers`` further, and only its first part is read until it is asked for. A guess that is not asked for
  next is closed. Readers never guess: a reader that announces "no next shard" gets none.

Only a shard of the same URL scheme is opened ahead (the opener that opens the current one opens it), under the
same settings (a stream opened under other settings is closed, never handed over); a shard that fails to open
ahead is dropped silently (the reader's own open reports). Memory: parts opened ahead come out of the process's
read-ahead budget (:mod:`shardstream.io.ranged`), plus the first part of the stream open ahead.

>>> next_in_series("https://h/train-000041.tar", "https://h/train-000042.tar")
'https://h/train-000043.tar'
>>> next_in_series("s3://b/a-0009.tar", "s3://b/a-0005.tar") is None  # backwards: no guess
True
>>> with Lookahead() as ahead:
...     ahead.open(lambda url: url.upper(), "https://h/b.tar", "https://h/q.tar")
'HTTPS://H/B.TAR'
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, TypeVar

from .._lazy import lazy_module
from .urls import split_scheme

if TYPE_CHECKING:
    import concurrent.futures

    from . import fetchers
else:
    fetchers = lazy_module("shardstream.io.fetchers")  # remote openers only: loads with the HTTP client

__all__ = ["Lookahead", "forget", "next_in_series", "open_in_series"]

T = TypeVar("T")
_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")
# re-entrant: a reader's generator dropped earlier may be finalized by the garbage collector inside a locked region
# of this thread (any allocation there can run it), and its Lookahead.close() takes the lock again
_LOCK = threading.RLock()
_LAST: dict[tuple[str, str], str] = {}  # series (prefix, suffix) -> the last URL opened by a bare open
# (owner, URL) -> (its stream, being opened or open; the settings it is opened under). Owner: a Lookahead, or
# None for the guesses of bare opens
_AHEAD: dict[tuple[Lookahead | None, str], tuple[concurrent.futures.Future[Any], Any]] = {}
_POOL: concurrent.futures.ThreadPoolExecutor | None = None  # made with the first shard opened ahead
_OPENING = threading.local()  # .tentative: a guess on no evidence (first part only); .told: (owner, next URL)


def _after_fork() -> None:
    """A forked child (a DataLoader worker) has none of the parent's threads: fresh lock, pool and streams (the
    parent's connections are never used by the child)."""
    global _LOCK, _POOL, _OPENING
    _LOCK = threading.RLock()
    _AHEAD.clear()
    _LAST.clear()
    _POOL = None
    _OPENING = threading.local()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """The two threads that open shards ahead (made on first use: ``import shardstream`` starts no thread and
    loads no thread pool); called under ``_LOCK``."""
    global _POOL
    if _POOL is None:
        import concurrent.futures  # noqa: PLC0415 - loads with the first shard opened ahead

        _POOL = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="shardstream-prefetch")
    return _POOL


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Lookahead:
    """A reader's hand-off to the openers: the shard it opens next (see the module docstring). One per reading
    loop; close it when the loop ends (a ``with`` block does)."""

    def __init__(self) -> None:
        self.closed = False  # closed for good: nothing more is opened ahead for it

    def open(self, opener: Callable[[str], T], url: str, following: str | None, known: bool = True) -> T:
        """``opener(url)``, telling the opener that ``following`` (None: nothing) is the next shard opened (as the
        opener will see it: after the URL rewrite rules). ``known=False``: the reader cannot tell (a bare open:
        the opener may guess)."""
        _OPENING.told = (self, following) if known else None
        try:
            return opener(url)
        finally:
            _OPENING.told = None

    def close(self) -> None:
        """Close the shard opened ahead, if any (the reader will not ask for it)."""
        with _LOCK:
            self.closed = True
            mine = [key for key in _AHEAD if key[0] is self]
            dropped = [_AHEAD.pop(key)[0] for key in mine]
        for future in dropped:
            _drop(future)

    def __enter__(self) -> Lookahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tentative() -> bool:
    """Whether the stream being opened in this thread is a first guess (it should read its first part only)."""
    return getattr(_OPENING, "tentative", False)


def _series(url: str) -> tuple[tuple[str, str], int, int] | None:
    """``((prefix, suffix), number, width)`` of the last number in the URL's path; None when the path has none
    (a number in the host or port is no shard number: ``http://h:8080/a.tar`` is not followed by port 8081)."""
    path, _, query = url.partition("?")
    m = _NUMBERED.match(path)
    if m is None or query:
        return None
    scheme = path.find("://")
    if scheme >= 0:
        host_end = path.find("/", scheme + 3)
        if host_end < 0 or m.start(2) < host_end:
            return None
    return (m.group(1), m.group(3)), int(m.group(2)), len(m.group(2))


def _shifted(url: str, stride: int) -> str | None:
    found = _series(url)
    if found is None or stride < 1:
        return None
    (prefix, suffix), number, width = found
    return f"{prefix}{number + stride:0{width}d}{suffix}"


def next_in_series(previous: str, current: str) -> str | None:
    """The URL one stride after ``current`` when ``previous`` and ``current`` are numbered shards of one series
    read forwards; else None."""
    a, b = _series(previous), _series(current)
    if a is None or b is None or a[0] != b[0] or b[1] <= a[1]:
        return None
    (prefix, suffix), number, width = b
    return f"{prefix}{number + (b[1] - a[1]):0{width}d}{suffix}"


def _replan(done: concurrent.futures.Future[Any]) -> None:
    if done.exception() is None:
        done.result().replan()


def forget(wait: bool = True) -> None:
    """Drop every shard opened ahead and forget the series seen (their streams are closed; with ``wait``, once
    the opens under way have finished): nothing opened for an earlier reader reaches a later one."""
    with _LOCK:
        futures = [future for future, _ in _AHEAD.values()]
        _AHEAD.clear()
        _LAST.clear()
    for future in futures:
        _drop(future)
    if wait and futures:
        import concurrent.futures  # noqa: PLC0415 - loaded already: there are futures

        concurrent.futures.wait(futures)


def _drop(future: concurrent.futures.Future[Any]) -> None:
    def close(done: concurrent.futures.Future[Any]) -> None:
        if done.exception() is None:
            done.result().close()

    future.add_done_callback(close)


def _take(owner: Lookahead | None, url: str, context: Any) -> concurrent.futures.Future[Any] | None:
    """The stream of ``url`` opened ahead for ``owner`` under ``context``; the owner's others are dropped."""
    with _LOCK:
        found = _AHEAD.pop((owner, url), None)
        stale = [_AHEAD.pop(key)[0] for key in [key for key in _AHEAD if key[0] is owner]]  # it went elsewhere
    if found is not None and found[1] != context:
        stale.append(found[0])
        found = None
    for future in stale:
        _drop(future)
    return None if found is None else found[0]


def _following(owner: Lookahead | None, told: str | None, url: str) -> tuple[str | None, bool]:
    """The URL to open ahead after ``url``, and whether it is a first guess (no evidence)."""
    if owner is not None:  # a reader said which shard comes next: that one, if the same opener opens it
        same = told is not None and split_scheme(told)[0] == split_scheme(url)[0]
        return (told if same else None), False
    series = _series(url)
    if series is None:
        return None, False
    with _LOCK:
        previous = _LAST.get(series[0])
        _LAST[series[0]] = url
    if previous is not None:
        return next_in_series(previous, url), False
    return _shifted(url, fetchers.worker_count()), True


def open_in_series(url: str, open_stream: Callable[[str], IO[bytes]], context: Any = None) -> IO[bytes]:
    """``open_stream(url)``, or the stream of ``url`` opened ahead (under the same ``context``: the settings);
    and arrange for the next shard (the one the reader told, else the guess of a numbered series) to be opened
    ahead with ``open_stream`` once this one's parts are all requested (streams with a ``when_planned`` hook)."""
    owner, told = getattr(_OPENING, "told", None) or (None, None)
    _OPENING.told = None  # the reader's own open only (an opener may open other URLs inside)
    ahead = _take(owner, url, context)
    stream = None
    if ahead is not None:
        try:
            stream = ahead.result()
        except Exception:  # noqa: BLE001 - the reader's own open below reports what is wrong
            stream = None
    if stream is None:
        stream = open_stream(url)
    following, first_guess = _following(owner, told, url)
    if following is not None and hasattr(stream, "when_planned"):
        opened = stream

        def opening(target: str) -> IO[bytes]:
            _OPENING.tentative = first_guess
            try:
                return open_stream(target)
            finally:
                _OPENING.tentative = False

        def start() -> None:
            with _LOCK:
                if opened.closed or (owner is not None and owner.closed) or any(k[0] is owner for k in _AHEAD):
                    return
                if owner is None and _LAST.get(_series(url)[0]) != url:  # type: ignore[index]
                    return  # a later shard of the series was opened meanwhile
                guess = _pool().submit(opening, following)
                _AHEAD[(owner, following)] = (guess, context)
            if first_guess:  # its parts go out when this shard's are all in (the link would idle)
                setattr(opened, "when_fetched", lambda: guess.add_done_callback(_replan))  # noqa: B010

        setattr(stream, "when_planned", start)  # noqa: B010 - the hook of a RangedStream
    getattr(stream, "replan", lambda: None)()  # a stream opened ahead plans its parts now it is read
    return stream
