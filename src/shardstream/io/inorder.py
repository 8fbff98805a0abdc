"""The reader's side of a read made of parts (:mod:`shardstream.io.ranged`): the bytes that other threads put in
the parts, handed to one reader in order, under one lock.

:class:`InOrder` keeps the parts (:class:`~shardstream.io.parts.Part`, in stream order) and the reader's place among
them. ``read`` and ``readinto`` take the bytes of the reader's part as they arrive, wait while it has none, raise its
error where it stands in the stream, and go on to the next part once it is done. Two hooks tell the writers' side:
``_plan`` (the reader moved on: more parts may be requested now) and ``_give`` (a part is over: its read-ahead memory
is free). ``close``, or an error, stops every part and drops its bytes.

>>> from shardstream.io.parts import Part
>>> stream = InOrder("demo", part_size=1 << 20)
>>> for index, data in enumerate([b"abc", b"de"]):
...     part = Part(index, 3 * index, 3 * index + len(data))
...     part.add(data)
...     part.done = True
...     stream._parts.append(part)
>>> stream.read(2), stream.read(10), stream.read(10), stream.read(10), stream.tell()
(b'ab', b'c', b'de', b'', 5)
"""

from __future__ import annotations

import io
import threading

from ..errors import OpenError
from .chunks import drain_into, take_chunk
from .parts import Part

__all__ = ["InOrder"]

_MAX_DRAIN = 16 << 20  # finish() reads the rest of a stream when at most this much is left


class InOrder(io.RawIOBase):
    """The parts' bytes, in order, to one reader (see the module docstring); ``part_size``: what a throttled part
    may hold unread; ``size``: the object's size, when known. Subclasses fill ``_parts`` under ``_cond``."""

    def __init__(self, name: str, *, part_size: int):
        super().__init__()
        self.name = name
        self.part_size = part_size
        self.size: int | None = None
        self._cond = threading.Condition()  # the parts and the reader
        self._parts: list[Part] = []
        self._cur = 0  # the reader's part
        self._stopped = False  # closed, or failed: no more parts
        self.pos = 0
        self.buffered = self.most_buffered = 0  # bytes received, not yet read (all parts); the most there were

    # -- the hooks of the writers' side (under the lock) -------------------------------------------------------

    def _plan(self) -> None:
        """The reader moved on to the next part: request what now fits (nothing here)."""

    def _give(self, part: Part) -> None:
        """``part`` is over: give its read-ahead memory back (nothing here)."""

    # -- reading ------------------------------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def _head(self) -> Part | None:
        """The reader's part, once it has bytes (None at the end); raises a part's error."""
        while True:
            if self._cur >= len(self._parts):
                return None
            part = self._parts[self._cur]
            if part.chunks:
                return part
            if part.error is not None:
                self._release()  # an error ends the stream: its parts stop and give their memory back
                raise part.error
            if part.done:
                self._give(part)
                self._cur += 1
                self._plan()
                continue
            self._cond.wait()

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.closed:
            raise ValueError(f"read from a closed {type(self).__name__}")
        with self._cond:
            part = self._head()
            n = drain_into(part.chunks, memoryview(b).cast("B")) if part is not None else 0
            if n:
                self._taken(part, n)  # type: ignore[arg-type]
        self.pos += n
        return n

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes as they arrive (all that is left for -1); whole chunks without a copy."""
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(1 << 20), b""))
        if self.closed:
            raise ValueError(f"read from a closed {type(self).__name__}")
        with self._cond:
            part = self._head()
            if part is None or size == 0:
                return b""
            head = take_chunk(part.chunks, size)
            self._taken(part, len(head))
        self.pos += len(head)
        return head

    def _taken(self, part: Part, n: int) -> None:
        """The reader took ``n`` bytes of ``part`` (under the lock): a throttled part may read on."""
        part.buffered -= n
        self.buffered -= n
        if part.throttled and part.buffered < self.part_size:
            self._cond.notify_all()

    def finish(self) -> None:
        """The reader is done: read what is left when it is little (a tar reader stops before the padding), so
        that a short answer is an error here too."""
        if self.size is not None and 0 < self.size - self.pos <= _MAX_DRAIN:
            buf = bytearray(1 << 20)
            while self.readinto(buf):
                pass

    def tell(self) -> int:
        return self.pos

    # -- stopping -----------------------------------------------------------------------------------------------

    def _release(self) -> None:
        """Stop every part and give back its read-ahead memory (under the lock)."""
        self._stopped = True
        for part in self._parts:
            if part.stream is not None and not part.done:
                part.stream.abort()  # a part waiting on a slow or stalled server frees its fetch thread now
            part.stream = None
            if not part.done:
                part.done, part.error = True, part.error or OpenError(f"{self.name!r}: stopped", url=self.name)
            self.buffered -= part.clear()
            self._give(part)
        self._cond.notify_all()

    def close(self) -> None:
        if not self.closed:
            super().close()
            with self._cond:
                self._release()
