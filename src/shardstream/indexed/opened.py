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

__all__ = ["Handles", "OpenShard", "ShardTable", "gather_rows", "sample_gatherer"]


class ShardTable(NamedTuple):
    """What the C batch reader (``gather_samples``, see :func:`gather_rows`) reads of one shard, by position (the
    order of ``_native/_scan_gather.c``): its memory map and URL, its first row in the dataset, and its index arrays
    (:class:`~shardstream.indexed.shardindex.ShardIndex`: 8-byte ``offsets`` and ``sizes``, 4-byte ``starts``,
    ``key_ends`` and ``ext_ids``, the keys end to end in ``key_bytes``, and the ``extensions`` tuple).
    :meth:`OpenShard.table` makes it; nothing else builds one."""

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

    def table(self) -> ShardTable | None:
        """What the C batch reader (``gather_samples``, see :meth:`IndexedDataset.__getitems__`) needs of this
        shard; None when its samples are not bytes sliced out of a memory map (``zero_copy``, or another byte
        source)."""
        table = self._table
        if table is False:
            index, source = self.index, self.source
            table = None
            if not self.zero_copy and isinstance(source, LocalSource):
                table = ShardTable(source.buffer, self.url, self.first, index.offsets, index.sizes, index.starts,
                                   index.key_ends, index.key_bytes, index.ext_ids, index.extensions)
            self._table = table
        return table

    def sample(self, i: int) -> dict:
        """Sample ``i`` of this shard (a shard-local number), its fields as bytes or views."""
        index, read = self.index, self.read
        exts, ids, offsets, sizes = index.extensions, index.ext_ids, index.offsets, index.sizes
        sample: dict[str, Any] = {"__key__": index.key(i), "__url__": self.url}
        for m in range(index.starts[i], index.starts[i + 1]):
            sample[exts[ids[m]]] = read(offsets[m], sizes[m])
        return sample


class Handles:
    """What a process has open: loaded indexes and sources, by shard number (never pickled), and the C batch
    reader's tables of the open shards (``tables``: a shard leaves it when it leaves ``open``)."""

    __slots__ = ("pid", "indexes", "open", "verified", "tables")

    def __init__(self, indexes: dict[int, ShardIndex] | None = None):
        self.pid = os.getpid()
        self.indexes: dict[int, ShardIndex] = indexes or {}
        self.tables: dict[int, ShardTable] = {}
        self.open: OpenShards[OpenShard] = OpenShards(close=lambda shard: shard.source.close(),  # bounded: an LRU
                                                      drop=lambda number: self.tables.pop(number, None))
        self.verified: dict[int, object] = {}  # shard -> file identity checked against its index (reopen: no hash)

    def close(self) -> None:
        self.open.clear()


def gather_rows(indices: np.ndarray, rows: range, ends: np.ndarray, shard: Callable[[int], OpenShard],
                handles: Handles, columns: bool = False) -> Any:
    """The samples at ``indices`` (an integer array of positions in ``rows``, the dataset's view) read in one C
    call; ``ends`` are the shards' cumulative sample counts, ``shard(number)`` opens a shard in ``handles``, whose
    ``tables`` the call reads. None where the call does not apply (no extension, a source that is not a memory
    map, ``zero_copy``, a position out of range, a batch of more shards than half the open limit): the
    per-sample path then gives the samples, or the error. ``columns``: the batch as the default collation
    (:func:`~shardstream.pipeline.default_collation_fn`) makes it of those samples, ``{field: [value, ...]}``,
    where every sample has the first one's fields in the same order (else None)."""
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
        table = shard(out).table()
        if table is None:
            return None
        tables[out] = table
    return None
