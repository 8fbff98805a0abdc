"""Byte sources: where an indexed dataset reads bytes at known offsets (the seam for remote backends).

A :class:`ByteSource` is an open shard (or index file) that answers ``read(offset, size)`` with ``bytes`` and
``view(offset, size)`` with a zero-copy ``memoryview`` where it can. Local files and ``file:`` URLs are built in
(:class:`LocalSource`: one read-only memory map, so member data comes straight from the page cache); other URL
schemes plug in with :func:`register_source` (a factory ``url -> ByteSource``, e.g. HTTP Range reads or a file
in the shard cache), and :func:`open_source` picks by scheme.

Sources are opened inside the process that reads (each DataLoader worker opens its own): they are never
pickled. A reader keeps at most ``SHARDSTREAM_MAX_OPEN_SHARDS`` of them open (:class:`OpenShards`, least recently
used closed first), so any number of shards fits in the descriptor limit.

**A shard must not be truncated in place while it is mapped**: reading pages of a file that was truncated under
the map kills the process with ``SIGBUS``. Write a new file and rename it, as :class:`~shardstream.ShardWriter`
does (the old map then keeps the old file alive, and the freshness check of the index catches the change at the
next open); where shards may be truncated under a running reader, set ``SHARDSTREAM_MMAP=0``: sources then read
through ``pread`` (:class:`PreadSource`) and a truncated shard raises
:class:`~shardstream.errors.StaleIndexError`.

>>> with open("blob.bin", "wb") as f:
...     _ = f.write(b"0123456789")
>>> src = open_source("blob.bin")
>>> src.size, src.read(2, 3), bytes(src.view(8, 2))
(10, b'234', b'89')
>>> src.close()
"""

from __future__ import annotations

import io
import mmap
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ..config import Settings, get_settings
from ..errors import ConfigError, OpenError, StaleIndexError
from ..io.urls import local_path, split_scheme

__all__ = ["ByteSource", "LocalSource", "OpenShards", "PreadSource", "local_path", "open_limit", "open_source",
           "register_source"]

V = TypeVar("V")

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

    __slots__ = ("url", "path", "size", "identity", "_map")

    def __init__(self, path: str | os.PathLike[str], url: str | None = None):
        self.path = os.fspath(path)
        self.url = self.path if url is None else url
        try:
            with open(self.path, "rb") as f:
                self.size, self.identity = _stat(f.fileno())
                # an empty file cannot be mapped; it reads as empty
                self._map: mmap.mmap | None = (
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
                )
        except OSError as e:
            raise _open_error(self.url, e) from e

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


def _stat(fd: int) -> tuple[int, tuple[int, ...]]:
    """``(size, identity)`` of an open file: the identity (device, inode, size, mtime) changes when it does."""
    st = os.fstat(fd)
    return st.st_size, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _open_error(url: str, e: OSError) -> OpenError:
    err = OpenError(f"cannot open {url!r}: {e.strerror or e}", url=url)
    err.errno = e.errno
    return err


class PreadSource:
    """A local file read with ``pread`` (``SHARDSTREAM_MMAP=0``): no memory map, so a shard truncated while open
    raises :class:`~shardstream.errors.StaleIndexError` instead of ``SIGBUS``. ``view`` copies like ``read``.

    >>> with open("ten.bin", "wb") as f:
    ...     _ = f.write(bytes(range(10)))
    >>> with PreadSource("ten.bin") as src:
    ...     src.read(8, 5)
    b'\\x08\\t'
    """

    __slots__ = ("url", "path", "size", "identity", "_file")

    def __init__(self, path: str | os.PathLike[str], url: str | None = None):
        self.path = os.fspath(path)
        self.url = self.path if url is None else url
        try:
            self._file = io.FileIO(self.path, "r")  # closes its descriptor when dropped, too
        except OSError as e:
            raise _open_error(self.url, e) from e
        self.size, self.identity = _stat(self._file.fileno())

    def read(self, offset: int, size: int) -> bytes:
        if self._file.closed:
            raise OpenError(f"{self.url!r} is closed", url=self.url)
        fd, want = self._file.fileno(), max(0, min(size, self.size - offset))
        parts, got = [], 0
        while got < want:
            chunk = os.pread(fd, min(want - got, 1 << 30), offset + got)
            if not chunk:
                raise StaleIndexError(
                    f"shard {self.url!r} ended at byte {offset + got}, but it had {self.size} bytes when it was "
                    "opened: it was truncated or rewritten in place while being read; rewrite shards to a new "
                    "name and rename them, then rebuild their indexes",
                    url=self.url,
                )
            parts.append(chunk)
            got += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    view = read

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PreadSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple:
        raise TypeError("an open PreadSource is not picklable: pickle the path and open it where it is read")

    def __repr__(self) -> str:
        return f"PreadSource({self.url!r}, size={self.size})"


def open_limit(settings: Settings | None = None) -> int:
    """How many shards a reader keeps open: ``max_open_shards`` (``SHARDSTREAM_MAX_OPEN_SHARDS``), at most a
    quarter of this process's soft descriptor limit, at least 1.

    >>> open_limit(Settings(max_open_shards=8))
    8
    """
    limit = (settings or get_settings()).max_open_shards
    try:
        import resource  # noqa: PLC0415 - Unix-only stdlib module

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, soft // 4)
    except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module (Windows)
        pass
    return max(1, limit)


class OpenShards(Generic[V]):
    """Open shards by number, at most ``limit`` (default :func:`open_limit`); ``get`` marks a shard as used.

    Adding one more drops the least recently used: its map or descriptor is released with the last reference
    to it (at once, unless a zero-copy view or a column scan still uses it). :meth:`clear` closes every shard
    with ``close(value)``. ``drop(number)``, when given, is told of every shard dropped or closed (a cache of
    what the open shards hold forgets it).

    >>> closed = []
    >>> shards = OpenShards(2, close=closed.append)
    >>> shards[0], shards[1] = "a", "b"
    >>> shards.get(0), shards.get(5)
    ('a', None)
    >>> shards[2] = "c"
    >>> sorted(shards.keys())
    [0, 2]
    >>> shards.clear(); sorted(closed)
    ['a', 'c']
    """

    __slots__ = ("limit", "_close", "_drop", "_items")

    def __init__(self, limit: int | None = None, *, close: Callable[[V], Any],
                 drop: Callable[[int], Any] | None = None):
        self.limit = open_limit() if limit is None else max(1, int(limit))
        self._close, self._drop = close, drop
        self._items: OrderedDict[int, V] = OrderedDict()

    def get(self, number: int) -> V | None:
        item = self._items.get(number)
        if item is not None:
            self._items.move_to_end(number)
        return item

    def __setitem__(self, number: int, item: V) -> None:
        self._items[number] = item
        self._items.move_to_end(number)
        while len(self._items) > self.limit:
            dropped, _ = self._items.popitem(last=False)
            if self._drop is not None:
                self._drop(dropped)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[int]:
        return list(self._items)

    def values(self) -> list[V]:
        return list(self._items.values())

    def clear(self) -> None:
        """Close every open shard."""
        items, self._items = list(self._items.items()), OrderedDict()
        for number, item in items:
            if self._drop is not None:
                self._drop(number)
            self._close(item)


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


def open_source(url: str | os.PathLike[str], *, mapped: bool | None = None) -> ByteSource:
    """Open ``url`` for reads at offsets: local paths and ``file:`` URLs built in (memory-mapped, or read with
    ``pread`` when ``mapped=False``; default ``SHARDSTREAM_MMAP``), other schemes registered."""
    path = local_path(url)
    if path is not None:
        use_map = get_settings().mmap if mapped is None else mapped
        return (LocalSource if use_map else PreadSource)(path, os.fspath(url))
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
