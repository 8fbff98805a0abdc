"""The tar layer's way to the C accelerator (:mod:`shardstream._native`): the header walk, the writer's packing and
the walk's prefetch distance. Each function says what the extension has, whatever the switch says; its callers
(:func:`~shardstream.tar.reader.member_scan`, :meth:`~shardstream.tar.writer.TarStreamWriter.add_many`,
:func:`~shardstream.tar.buffers.map_windows`) ask the switch first.

- :func:`header_walk`: ``scan(buf, pos, base, headers_only=False) -> (members, new_pos)`` (``_scan_walk.c``), the
  twin of the Python walk in :func:`~shardstream.tar.reader.walk`;
- :func:`member_packer`: ``pack_members(buf, pos, template, members, direct) -> offsets | None`` (``_scan.c``), the
  twin of the loop of :meth:`~shardstream.tar.writer.TarStreamWriter.add_many`;
- :func:`prefetch_ahead`: how far ahead of a header the C walk prefetches (0: it does not).

>>> built() == (header_walk() is not None)
True
>>> prefetch_ahead() >= 0
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import _native

__all__ = ["Packer", "Scan", "built", "header_walk", "member_packer", "prefetch_ahead"]

#: The C walk: ``scan(buf, pos, base, headers_only=False) -> (members, new_pos)``.
Scan = Callable[..., tuple[list[Any], int]]
#: The C packer: ``pack(buf, pos, template, members, direct) -> offsets``, or None when it left the members to Python.
Packer = Callable[[bytearray, int, bytes, Sequence[tuple[Any, Any]], int], "list[int] | None"]


def built() -> bool:
    """Whether the extension is there (built, and loaded by :mod:`shardstream._native`)."""
    return _native.extension is not None


def header_walk() -> Scan | None:
    """The C header walk, or None without the extension."""
    ext = _native.extension
    return None if ext is None else ext.scan


def member_packer() -> Packer | None:
    """The C member packer (the writer's hot loop), or None without the extension.

    >>> pack = member_packer()
    >>> buf = bytearray()
    >>> pack is None or pack(buf, 0, bytes(512), [(b"a.txt", b"hi")], 1 << 16) == [512]
    True
    """
    return getattr(_native.extension, "pack_members", None)


def prefetch_ahead() -> int:
    """How many bytes ahead of a header the C walk prefetches (0: no prefetch, or no extension)."""
    return int(getattr(_native.extension, "PREFETCH_AHEAD", 0))
