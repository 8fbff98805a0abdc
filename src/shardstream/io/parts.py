"""The parts of a ranged read (:mod:`shardstream.io.ranged`): their sizes, their received bytes, the validators
every answer must share.

A shard is read as parts that start small, grow, and shrink again towards its end (:func:`span`), sized so that
every connection has work on a shard of a known size (:func:`fit`). A :class:`Part` holds what its answer has received and the reader has not
read yet (``buffered`` bytes); a *throttled* part reads on to the end of the object (a whole body, or an object
of unknown size) and waits while a part's worth of its bytes is buffered; a *blind* part was requested with the
first one, before its answer told the object's size and whether the server honours ``Range``.

>>> span(0, 8 << 20), span(16 << 20, 8 << 20), span(64 << 20, 8 << 20)
(1048576, 4194304, 8388608)
>>> span(64 << 20, 8 << 20, size=80 << 20), span(79 << 20, 8 << 20, size=(80 << 20) + 1000)  # near the end
(4194304, 1049576)
>>> fit(20 << 20, connections=16, part_size=8 << 20)
2097152
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .chunks import Chunks

__all__ = ["LEAD", "Part", "differs", "fit", "span"]

LEAD = 1 << 20  # the smallest part: the parts at the start of a shard (its first sample) are this big


def span(offset: int, part_size: int, size: int | None = None) -> int:
    """The size of the part starting at ``offset``: 1 MiB up to offset 8 MiB, then a quarter of the offset in
    whole MiBs, at most ``part_size``; and, the object's ``size`` known, at most a quarter of what is left after
    ``offset`` (1 MiB at least), so that the last parts are small too: the last bytes of a shard come over several
    connections at once rather than behind one big part at one connection's rate (the tail of a read). A rest
    smaller than 1 MiB joins the part before it when both fit in ``part_size``."""
    cost = min(part_size, max(LEAD, offset // 4 // LEAD * LEAD))
    if size is None:
        return cost
    left = size - offset
    cost = min(cost, max(LEAD, left // 4 // LEAD * LEAD))
    if 0 < left - cost < LEAD and left <= part_size:
        return left
    return cost


def fit(size: int, connections: int, part_size: int) -> int:
    """The part size that keeps every connection busy on a shard of ``size`` bytes (1 MiB at least, whole MiBs:
    part boundaries fall on the 1 MiB, 4 MiB... stripes object stores keep objects in), at most ``part_size``."""
    even = -(-size // connections // LEAD) * LEAD
    return max(min(LEAD, part_size), min(part_size, even))


def differs(first: Any, answer: Any) -> str | None:
    """How ``answer`` (an :class:`~shardstream.io.http.HttpStream`) shows another object than ``first`` (the
    first answer's ``size``, ``etag``, ``last_modified``), or None."""
    if answer.size is not None and first.size is not None and answer.size != first.size:
        return f"size {first.size} -> {answer.size}"
    if first.etag and answer.etag and answer.etag != first.etag:
        return f"ETag {first.etag} -> {answer.etag}"
    if first.last_modified and answer.last_modified and answer.last_modified != first.last_modified:
        return f"Last-Modified {first.last_modified} -> {answer.last_modified}"
    return None


class Part:
    """One byte range ``[start, end)`` of a ranged read (``end`` -1: to the end of an object of unknown size),
    its received ``chunks`` (``buffered`` bytes), and its state."""

    __slots__ = ("blind", "buffered", "chunks", "done", "end", "error", "index", "missed", "reserved", "seen", "start",
                 "stream", "throttled")

    def __init__(self, index: int, start: int, end: int):
        self.index, self.start, self.end = index, start, end
        self.chunks: Chunks = deque()
        self.buffered = 0  # bytes in chunks
        self.done, self.reserved = False, 0
        self.throttled = False  # reads on to the end of the object: waits while a part's worth is buffered
        self.error: BaseException | None = None
        self.seen: Any = None  # its answer, when it came before the first one: checked when that one comes
        self.stream: Any = None  # its request (an HttpStream), aborted when the reader stops
        self.blind = False  # requested before anything was known of the object (its size, Range support)
        self.missed: BaseException | None = None  # a blind request's failure, seen before the first answer

    def add(self, data: bytes) -> None:
        """Bytes received."""
        self.chunks.append(data)
        self.buffered += len(data)

    def clear(self) -> int:
        """Forget the bytes not read; returns how many there were."""
        dropped, self.buffered = self.buffered, 0
        self.chunks.clear()
        return dropped
