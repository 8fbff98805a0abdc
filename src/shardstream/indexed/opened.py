"""What an :class:`~shardstream.indexed.IndexedDataset` has open in a process, and its batch read.

- :class:`OpenShard`: one shard opened here (its index, its byte source, where it starts in the dataset);
  ``sample(i)`` reads one sample.
- :class:`Handles`: the loaded indexes and the open shards of a process (an LRU, see
  :class:`~shardstream.indexed.source.OpenShards`), never pickled.
- :func:`gather_rows`: a batch of rows (an integer array) read in one call of the C extension
  (``gather_samples``, reached through :func:`sample_gatherer`, given a :class:`ShardTable` per shard): the
  shards are found in C, and the sample dicts
  are made in C, the same dicts :meth:`OpenShard.sample` makes (keys decoded as UTF-8 with
  ``surrogateescape``, fields ``bytes`` copied out of the memory map, members in archive order). Where it does
  not apply it says so (None) and the caller reads sample by sample.
- :func:`row_gatherer`: :func:`gather_rows` for the batches of a whole epoch, its look-ups done once.
- :func:`pack_table`: a shard of small members as the C reader's table of a compact copy of their bytes (see
  :meth:`~shardstream.indexed.IndexedDataset.packed`): a tar shard of 250-byte fields is about 2 KiB per sample
  (headers, padding to 512-byte blocks), and a batch read at random positions touches every page of its memory
  map within an epoch, so the whole file ends up in the reader's resident memory; the copy holds only the fields.
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import _native
from ..tar.reader import accelerated
from .shardindex import ShardIndex
from .source import ByteSource, LocalSource, OpenShards

__all__ = ["PACK_BUDGET", "Handles", "OpenShard", "ShardTable", "gather_rows", "pack_table", "row_gatherer",
           "sample_gatherer"]

#: the bytes of member data a process copies out of its shards' maps, at most, per dataset (see :func:`pack_table`)
PACK_BUDGET = 256 << 20


class ShardTable(NamedTuple):
    """What the C batch reader (``gather_samples``, see :func:`gather_rows`) reads of one shard, by position (the
    order of ``_native/_scan_gather.c``): its memory map and URL, its first row in the dataset, and its index arrays
    (:class:`~shardstream.indexed.shardindex.ShardIndex`: 8-byte ``offsets`` and ``sizes``, 4-byte ``starts``,
    ``key_ends`` and ``ext_ids``, the keys end to end in ``key_bytes``, and the ``extensions`` tuple).
    :meth:`OpenShard.table` makes it (of the memory map, or of a packed copy: :func:`pack_table`); nothing else
    builds one."""

    buffer: mmap.mmap | bytes
    url: str
    first: int
    offsets: array
    sizes: array
    starts: array
    key_ends: array
    key_bytes: bytes
    ext_ids: array
    extensions: tuple[str, ...]


def sample_gatherer() -> Callable[..., Any] | None:
    """The C ``gather_samples(tables, ends, rows, columns=False)`` (a batch of sample dicts read from indexed shards,
    ``tables`` mapping shard numbers to :class:`ShardTable`) when the accelerator is on
    (:func:`~shardstream.tar.accelerated`) and the extension has it; else None. The indexed layer's way to the
    extension (:mod:`shardstream._native`) for batches; its twin is :meth:`OpenShard.sample`, row by row.

    >>> sample_gatherer() is None or callable(sample_gatherer())
    True
    """
    return getattr(_native.extension, "gather_samples", None) if accelerated() else None


class OpenShard:
    """One shard opened in this process: its index, its source (``source.buffer`` is its memory map, when it has
    one), its URL, and where it starts in the dataset (``first``). ``sample(i)`` reads its ``i``-th sample, fields
    undecoded (``memoryview`` objects with ``zero_copy``). ``layout`` is free for readers that cache a description
    of the shard (the column reader of :mod:`~shardstream.indexed.columns` does)."""

    __slots__ = ("first", "index", "source", "read", "url", "zero_copy", "layout", "_table")

    def __init__(self, first: int, index: ShardIndex, source: ByteSource, zero_copy: bool, url: str):
        self.first, self.index, self.source, self.url, self.zero_copy = first, index, source, url, zero_copy
        self.read = source.view if zero_copy else source.read
        self.layout: Any = False
        self._table: Any = False

    def table(self, handles: Handles | None = None, budget: int = 0) -> ShardTable | None:
        """What the C batch reader (``gather_samples``, see :meth:`IndexedDataset.__getitems__`) needs of this
        shard; None when its samples are not bytes sliced out of a memory map (``zero_copy``, or another byte
        source). With ``handles`` and a ``budget``, the table of a packed copy where :func:`pack_table` makes one
        (counted in ``handles.packed``, which stays within ``budget`` bytes)."""
        table = self._table
        if table is False:
            index, source = self.index, self.source
            table = None
            if not self.zero_copy and isinstance(source, LocalSource):
                table = ShardTable(source.buffer, self.url, self.first, index.offsets, index.sizes, index.starts,
                                   index.key_ends, index.key_bytes, index.ext_ids, index.extensions)
            self._table = table
        if table is not None and handles is not None and budget > 0 and not isinstance(table.buffer, bytes):
            packed = pack_table(table, budget - handles.packed)
            if packed is not None:
                handles.packed += len(packed.buffer)
                table = self._table = packed
                _drop_pages(getattr(self.source, "buffer", None))
        return table

    def sample(self, i: int) -> dict:
        """Sample ``i`` of this shard (a shard-local number), its fields as bytes or views."""
        index, read = self.index, self.read
        exts, ids, offsets, sizes = index.extensions, index.ext_ids, index.offsets, index.sizes
        sample: dict[str, Any] = {"__key__": index.key(i), "__url__": self.url}
        for m in range(index.starts[i], index.starts[i + 1]):
            sample[exts[ids[m]]] = read(offsets[m], sizes[m])
        return sample


def _drop_pages(mapped: Any) -> None:
    """Take a memory map's pages out of this process's resident memory (they stay in the page cache; a later read
    maps them again), where the platform can."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is not None and isinstance(mapped, mmap.mmap):
        mapped.madvise(advice)


class Handles:
    """What a process has open: loaded indexes and sources, by shard number (never pickled), and the C batch
    reader's tables of the open shards (``tables``: a shard leaves it when it leaves ``open``)."""

    __slots__ = ("pid", "indexes", "open", "verified", "tables", "packed")

    def __init__(self, indexes: dict[int, ShardIndex] | None = None):
        self.pid = os.getpid()
        self.indexes: dict[int, ShardIndex] = indexes or {}
        self.tables: dict[int, ShardTable] = {}
        self.open: OpenShards[OpenShard] = OpenShards(close=lambda shard: shard.source.close(),  # bounded: an LRU
                                                      drop=self._forget)
        self.verified: dict[int, object] = {}  # shard -> file identity checked against its index (reopen: no hash)
        self.packed = 0  # bytes held by the packed tables of the open shards (see pack_table)

    def _forget(self, number: int) -> None:
        """Shard ``number`` left ``open``: its table goes, and the bytes of its packed copy with it."""
        table = self.tables.pop(number, None)
        if table is not None and isinstance(table.buffer, bytes):
            self.packed -= len(table.buffer)

    def close(self) -> None:
        self.open.clear()


def pack_table(table: ShardTable, budget: int) -> ShardTable | None:
    """``table`` as the table of a compact copy of its shard's member data (each member's bytes end to end, the
    offsets into that copy; the same samples), when that copy is at most half the size of the mapped file and at
    most ``budget`` bytes; else None (keep reading the map). The copy is made once per shard and process; it is
    what keeps a random-access reader of small samples from holding whole tar files in resident memory.

    >>> from shardstream.indexed import ShardIndex, indexed_shard_writer
    >>> from shardstream.indexed.source import LocalSource
    >>> with indexed_shard_writer("small-%d.tar", maxcount=10) as sink:
    ...     for i in range(4):
    ...         _ = sink.write({"__key__": f"k{i}", "txt": "x" * i, "cls": i})
    >>> shard = OpenShard(0, ShardIndex.load("small-0.tar"), LocalSource("small-0.tar"), False, "small-0.tar")
    >>> packed = pack_table(shard.table(), PACK_BUDGET)
    >>> len(packed.buffer) < len(shard.table().buffer) // 2
    True
    >>> gather = sample_gatherer()
    >>> gather is None or gather({0: packed}, np.array([3]), np.array([1])) == [shard.sample(1)]
    True
    """
    sizes = np.frombuffer(table.sizes, dtype=np.uint64)
    payload = int(sizes.sum())
    if payload > budget or 2 * payload > len(table.buffer):
        return None
    buffer, starts = table.buffer, np.zeros(len(sizes), dtype=np.uint64)
    np.cumsum(sizes[:-1], out=starts[1:])
    data = b"".join([buffer[o : o + z] for o, z in zip(table.offsets, table.sizes, strict=True)])
    return table._replace(buffer=data, offsets=array("Q", starts.tobytes()))


def gather_rows(indices: np.ndarray, rows: range, ends: np.ndarray, shard: Callable[[int], OpenShard],
                handles: Handles, columns: bool = False, pack: int = 0) -> Any:
    """The samples at ``indices`` (an integer array of positions in ``rows``, the dataset's view) read in one C
    call; ``ends`` are the shards' cumulative sample counts, ``shard(number)`` opens a shard in ``handles``, whose
    ``tables`` the call reads. None where the call does not apply (no extension, a source that is not a memory
    map, ``zero_copy``, a position out of range, a batch of more shards than half the open limit): the
    per-sample path then gives the samples, or the error. ``columns``: the batch as the default collation
    (:func:`~shardstream.pipeline.default_collation_fn`) makes it of those samples, ``{field: [value, ...]}``,
    where every sample has the first one's fields in the same order (else None). ``pack``: a budget of bytes for
    packed copies of the shards opened here (:meth:`OpenShard.table`)."""
    gather = sample_gatherer()
    if gather is None or indices.ndim != 1 or indices.dtype.kind not in "iu":
        return None
    if not indices.size:
        return None if columns else []
    if rows.start == 0 and rows.step == 1 and len(ends) and rows.stop == ends[-1]:  # the whole dataset: positions
        where = np.ascontiguousarray(indices, dtype=np.int64)  # out of range find no shard (or none of its rows) in C
    else:
        if int(indices.min()) < 0 or int(indices.max()) >= len(rows):
            return None
        where = rows.start + indices.astype(np.int64) * rows.step
    tables, count = handles.tables, len(ends)
    for _ in range(handles.open.limit // 2):  # each round opens the first shard of the batch not open yet
        out = gather(tables, ends, where, columns)
        if type(out) is not int:
            return out
        if out >= count:  # a position past the end
            return None
        table = shard(out).table(handles, pack)
        if table is None:
            return None
        tables[out] = table
    return None


def row_gatherer(rows: range, ends: np.ndarray, handles: Handles, columns: bool,
                 slow: Callable[[np.ndarray], Any]) -> Callable[[np.ndarray], Any]:
    """A reader of many batches, ``read(indices)``, giving what ``slow(indices)`` gives (:func:`gather_rows` with
    these arguments): once every shard the batches touch is open, each batch is one C call with nothing looked up
    in Python. Whenever that call does not apply as it is (a shard not open yet, another process than the one
    of ``handles``, indices that are not a contiguous array of 8-byte integers, ``rows`` not the whole
    dataset), ``slow`` reads the batch.

    >>> from shardstream.indexed import IndexedDataset, index_dataset, indexed_shard_writer
    >>> with indexed_shard_writer("gathered-%d.tar", maxcount=3) as sink:
    ...     for i in range(5):
    ...         _ = sink.write({"__key__": f"k{i}", "cls": i})
    >>> ds = IndexedDataset(sink.shards)
    >>> read = ds.collated_reader()
    >>> [read(np.array([4, 0]))["cls"] for _ in range(2)]
    [[b'4', b'0'], [b'4', b'0']]
    """
    gather = sample_gatherer()
    if gather is None or not (rows.start == 0 and rows.step == 1 and len(ends) and rows.stop == int(ends[-1])):
        return slow
    tables, pid = handles.tables, handles.pid

    def read(indices: np.ndarray) -> Any:
        if pid == os.getpid():
            try:
                out = gather(tables, ends, indices, columns)
            except (BufferError, ValueError, TypeError):  # not a contiguous array of 8-byte integers
                out = -1
            if type(out) is not int:
                return out
        return slow(indices)  # opens the shard the batch lacks (then the next batch is one call), or says why not

    return read
