"""Handing received chunks to a reader: the one copy loop of the remote streams (ranged parts, object blocks).

Chunks (``bytes``, or a ``memoryview`` of the rest of a partly read one) wait in a deque; a reader either copies
as many as fit into its buffer (:func:`drain_into`) or takes the head chunk whole, without a copy
(:func:`take_chunk`).

>>> from collections import deque
>>> chunks = deque([b"abc", b"defg"])
>>> buf = bytearray(5); drain_into(chunks, memoryview(buf)), bytes(buf), take_chunk(chunks, 10)
(5, b'abcde', b'fg')
"""

from __future__ import annotations

from collections import deque

__all__ = ["drain_into", "take_chunk"]

Chunks = deque[bytes | memoryview]


def drain_into(chunks: Chunks, view: memoryview) -> int:
    """Copy the chunks' bytes into ``view`` (a byte view), as many as fit; returns how many. Chunks used up
    leave the deque; a partly read one stays as a view of its rest (no copy)."""
    n = 0
    while chunks and n < len(view):
        head = chunks[0]
        k = min(len(head), len(view) - n)
        view[n:n + k] = head[:k]
        n += k
        if k == len(head):
            chunks.popleft()
        else:
            chunks[0] = memoryview(head)[k:]
    return n


def take_chunk(chunks: Chunks, size: int) -> bytes:
    """Up to ``size`` bytes of the head chunk (there must be one): the chunk itself when it fits (no copy)."""
    head = chunks[0]
    if len(head) <= size:
        chunks.popleft()
        return head if isinstance(head, bytes) else head.tobytes()
    chunks[0] = memoryview(head)[size:]
    return bytes(head[:size])
