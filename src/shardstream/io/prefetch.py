"""Prefetch of the next shard when a process reads numbered shards in a regular sequence.

A reader opens its shards one after the other, and the next URL is not known to the opener until the previous
shard is finished: on a long link that costs a round trip (and the ramp-up of its connections) at every shard
boundary. Shard names are numbered (``train-000041.tar``), and a DataLoader worker or a rank reads them with a
fixed stride (``41, 42, 43`` in one process; ``41, 45, 49`` in worker 1 of 4). So, like a file system's
read-ahead: when the last two shards a process opened from one series differ by a stride, the shard one stride
further is opened as soon as every part of the current one has been requested (its first part and the parts that
fit in the read-ahead budget start then). After the first shard of a series, with no stride seen yet, the guess
is the shard ``num_workers`` further (a DataLoader worker's stride, 1 outside workers) and only its first part is
read until the reader asks for it. If the reader asks for the guess, it gets that stream; if it asks for anything
else (shuffled shards), the guess is closed and the stride forgotten until the reader shows one again. At most
one guess is open at a time; a guess that fails to open is dropped silently (the reader's own open reports).

>>> next_in_series("https://h/train-000041.tar", "https://h/train-000042.tar")
'https://h/train-000043.tar'
>>> next_in_series("s3://b/a-0009.tar", "s3://b/a-0005.tar") is None  # backwards: no guess
True
>>> next_in_series("https://h/a-7.tar", "https://h/b-8.tar") is None  # another series
True
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import threading
from collections.abc import Callable
from typing import IO, Any

from .fetchers import worker_count

__all__ = ["next_in_series", "open_in_series"]

_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")
_LOCK = threading.Lock()
_LAST: dict[tuple[str, str], str] = {}  # series (prefix, suffix) -> the last URL opened
_GUESS: dict[str, concurrent.futures.Future[Any]] = {}  # URL -> its stream, being opened or open
_CONTEXT: dict[str, Any] = {}  # URL -> the settings it was opened with (a guess is used only under the same)
_POOL = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="shardstream-prefetch")
def _after_fork() -> None:
    """A forked child (a DataLoader worker) has none of the parent's threads: fresh lock, pool and guesses."""
    global _LOCK, _POOL
    _LOCK = threading.Lock()
    _GUESS.clear()
    _CONTEXT.clear()
    _LAST.clear()
    _POOL = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="shardstream-prefetch")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

_OPENING = threading.local()  # .tentative: the stream being opened is a guess on no evidence (first part only)


def tentative() -> bool:
    """Whether the stream being opened in this thread is a first guess (it should read its first part only)."""
    return getattr(_OPENING, "tentative", False)


def _series(url: str) -> tuple[tuple[str, str], int, int] | None:
    path, _, query = url.partition("?")
    m = _NUMBERED.match(path)
    if m is None or query:
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
        guesses = list(_GUESS.values())
        _GUESS.clear()
        _CONTEXT.clear()
        _LAST.clear()
    for future in guesses:
        _drop(future)
    if wait:
        concurrent.futures.wait(guesses)


def _drop(future: concurrent.futures.Future[Any]) -> None:
    def close(done: concurrent.futures.Future[Any]) -> None:
        if done.exception() is None:
            done.result().close()

    future.add_done_callback(close)


def open_in_series(url: str, open_stream: Callable[[str], IO[bytes]], context: Any = None) -> IO[bytes]:
    """``open_stream(url)``, or the stream of ``url`` opened ahead (under the same ``context``: the settings);
    and arrange for the next shard of the series to be opened ahead once this one's parts are all requested
    (streams with a ``when_planned`` hook)."""
    series = _series(url)
    with _LOCK:
        guessed = _GUESS.pop(url, None)
        if guessed is not None and _CONTEXT.get(url) != context:
            stale, guessed = [guessed], None
        else:
            stale = []
        stale += _GUESS.values()  # the reader went elsewhere: the guesses were wrong
        _GUESS.clear()
        _CONTEXT.clear()
        previous = _LAST.get(series[0]) if series is not None else None
        if series is not None:
            _LAST[series[0]] = url
    for future in stale:
        _drop(future)
    stream = None
    if guessed is not None:
        try:
            stream = guessed.result()
        except Exception:  # noqa: BLE001 - the reader's own open below reports what is wrong
            stream = None
    if stream is None:
        stream = open_stream(url)
    if previous is not None:
        following, first_guess = next_in_series(previous, url), False
    else:

        following, first_guess = _shifted(url, worker_count()), True
    if following is not None and hasattr(stream, "when_planned"):
        def opening(target: str) -> IO[bytes]:
            _OPENING.tentative = first_guess
            try:
                return open_stream(target)
            finally:
                _OPENING.tentative = False

        def start() -> None:
            with _LOCK:
                if _LAST.get(series[0]) != url or _GUESS:  # type: ignore[index]
                    return
                guess = _GUESS[following] = _POOL.submit(opening, following)
                _CONTEXT[following] = context
            if first_guess:  # its parts go out when this shard's are all in (the link would idle)
                stream.when_fetched = lambda: guess.add_done_callback(_replan)

        stream.when_planned = start  # type: ignore[attr-defined]
    getattr(stream, "replan", lambda: None)()  # a stream opened ahead plans its parts now it is read
    return stream
