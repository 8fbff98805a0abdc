"""Byte sources: where an indexed dataset reads bytes at known offsets (the seam for remote backends).

A :class:`ByteSource` is an open shard (or index file) that answers ``read(offset, size)`` with ``bytes`` and
``view(offset, size)`` with a zero-copy ``memoryview`` where it can. Local files and ``file:`` URLs are built in
(:class:`LocalSource`: one read-only memory map, so member data comes straight from the page cache); other URL
schemes plug in with :func:`register_source` (a factory ``url -> ByteSource``, e.g. HTTP Range reads or a file
in the shard cache), and :func:`open_source` picks by scheme.

Sources are opened inside the process that reads (each DataLoader worker opens its own): they are never
pickled. A shard must not be rewritten in place while it is mapped: reading pages of a file that was truncated
under the map kills the process with ``SIGBUS`` (write a new file and rename it, as :class:`~shardstream.ShardWriter`
does; the old map then keeps the old file alive, and the freshness check of the index catches the change at
the next open).

>>> with open("blob.bin", "wb") as f:
...     _ = f.write(b"0123456789")
>>> src = open_source("blob.bin")
>>> src.size, src.read(2, 3), bytes(src.view(8, 2))
(10, b'234', b'89')
>>> src.close()
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..errors import ConfigError, OpenError
from ..io.urls import local_path, split_scheme

__all__ = ["ByteSource", "LocalSource", "local_path", "open_source", "register_source"]

_FACTORIES: dict[str, Callable[[str], ByteSource]] = {}


@runtime_checkable
class ByteSource(Protocol):
    """What an indexed dataset needs from an open shard: its size and bytes at offsets."""

    url: str
    size: int

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` (fewer only past the end)."""

    def view(self, offset: int, size: int) -> memoryview | bytes:
        """The same bytes without a copy where the source can (a memory map); else as ``read``."""

    def close(self) -> None:
        """Release the source; views handed out stay valid (they keep the mapping alive)."""


class LocalSource:
    """A local file, memory-mapped read-only. ``read`` copies out of the page cache; ``view`` does not.

    >>> with open("ten.bin", "wb") as f:
    ...     _ = f.write(bytes(range(10)))
    >>> with LocalSource("ten.bin") as src:
    ...     src.read(0, 4)
    b'\\x00\\x01\\x02\\x03'
    """

    __slots__ = ("url", "path", "size", "_map")

    def __init__(self, path: str | os.PathLike[str], url: str | None = None):
        self.path = os.fspath(path)
        self.url = self.path if url is None else url
        try:
            with open(self.path, "rb") as f:
                self.size = os.fstat(f.fileno()).st_size
                # an empty file cannot be mapped; it reads as empty
                self._map: mmap.mmap | None = (
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
                )
        except OSError as e:
            err = OpenError(f"cannot open {self.url!r}: {e.strerror or e}", url=self.url)
            err.errno = e.errno
            raise err from e

    @property
    def buffer(self) -> mmap.mmap | bytes:
        """The whole file as a read-only buffer (the map itself; ``b""`` for an empty file)."""
        return self._map if self._map is not None else b""

    def read(self, offset: int, size: int) -> bytes:
        mapped = self._map
        return mapped[offset : offset + size] if mapped is not None else b""

    def view(self, offset: int, size: int) -> memoryview | bytes:
        mapped = self._map
        return memoryview(mapped)[offset : offset + size] if mapped is not None else b""

    def close(self) -> None:
        mapped, self._map = self._map, None
        if mapped is not None:
            try:
                mapped.close()
            except BufferError:  # zero-copy views are still alive: the map closes when the last one goes
                pass

    def __enter__(self) -> LocalSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple:
        raise TypeError("an open LocalSource is not picklable: pickle the path and open it where it is read")

    def __repr__(self) -> str:
        return f"LocalSource({self.url!r}, size={self.size})"


def register_source(scheme: str, factory: Callable[[str], ByteSource]) -> None:
    """Make :func:`open_source` open ``scheme://...`` URLs with ``factory(url)``.

    >>> import io
    >>> class Memory:
    ...     def __init__(self, url): self.url, self._data = url, b"abcdef"; self.size = 6
    ...     def read(self, offset, size): return self._data[offset:offset + size]
    ...     view = read
    ...     def close(self): pass
    >>> register_source("mem", Memory)
    >>> open_source("mem://x").read(1, 2)
    b'bc'
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]+", scheme) or not callable(factory):
        raise ConfigError(f"register_source needs a scheme name and a callable url -> ByteSource, got {scheme!r}")
    _FACTORIES[scheme.lower()] = factory


def open_source(url: str | os.PathLike[str]) -> ByteSource:
    """Open ``url`` for reads at offsets: local paths and ``file:`` URLs built in, other schemes registered."""
    path = local_path(url)
    if path is not None:
        return LocalSource(path, os.fspath(url))
    text = os.fspath(url)
    scheme, _ = split_scheme(text)
    if not scheme:  # "-": standard input cannot be read at offsets
        raise ConfigError(f"{text!r} is standard input: random access reads files; save the shard to a file first")
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise ConfigError(
            f"no byte source for {scheme}:// URLs ({text!r}): random access reads local files and file: URLs; "
            "copy the shards and their indexes locally, or register a source with "
            "shardstream.indexed.register_source(scheme, factory)"
        )
    return factory(text)
