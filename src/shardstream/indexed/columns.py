"""Column batches read straight from indexed shards: :meth:`IndexedDataset.columns`.

``ds.columns(batch_size)`` gives what batching ``iter(ds)`` into columns gives (a
:class:`~shardstream.samples.ColumnBatches` over the samples, each decoded by the dataset's decoder): batches of
``batch_size`` rows in order, running across shards; a sample with other fields than its batch ends the batch
early; ``partial=False`` drops the last, short batch. No tar header is read: the shard index says where every
field is, so a batch is a slice of each field's column of offsets.

Where a shard's samples all have the same fields in the same order (the usual case) and the shard is a local
memory map, each column of a batch is made in one native call (``slice_column`` of the optional C extension,
reached through :func:`column_slicer`): ``bytes`` for fields that stay bytes, and for the fields the decoder hands to the codec
table's ``text`` and ``int`` codecs (:meth:`~shardstream.codecs.Decoder.table_codec`), ``str`` and ``int`` made
straight from the map. The native step only takes the simple forms (valid UTF-8; ``[+-]?[0-9]{1,18}``) and
gives the column back otherwise; the column is then decoded by :meth:`Decoder.decode_columns`, which gives the
value or the error (naming the sample's key). Every other field, shard and dataset takes the per-sample path.

>>> from shardstream.indexed import IndexedDataset, indexed_shard_writer
>>> with indexed_shard_writer("caps-%03d.tar", maxcount=4) as sink:
...     for i in range(6):
...         _ = sink.write({"__key__": f"c{i}", "txt": f"caption {i}", "cls": i})
>>> ds = IndexedDataset(sink.shards, decode=True)
>>> [batch["cls"] for batch in ds.columns(5)]
[[0, 1, 2, 3, 4], [5]]
>>> next(ds.columns(2))
{'__key__': ['c0', 'c1'], '__url__': ['caps-000.tar', 'caps-000.tar'], 'cls': [0, 1], 'txt': ['caption 0', 'caption 1']}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import numpy as np

from .. import _native
from ..codecs import Decoder
from ..errors import ConfigError
from ..reading import ColumnBatches
from ..reading_accel import CONVERSIONS
from ..tar.reader import accelerated
from .shardindex import ShardIndex


class _Spans(Protocol):
    """What the column reader needs of a dataset (an :class:`~shardstream.indexed.IndexedDataset`)."""

    @property
    def stages(self) -> tuple[Any, ...]: ...

    def shard_spans(self) -> Iterable[tuple[Any, range]]: ...

__all__ = ["iter_columns"]

_BYTES, _KEYS = CONVERSIONS[""], 2  # slice_column's modes: bytes kept; keys (UTF-8 with surrogateescape)


def column_slicer() -> Callable[..., list[Any] | None] | None:
    """The C ``slice_column(buffer, offsets, sizes, start, stop, mode)`` (rows ``start..stop`` of one column, each
    ``buffer[offsets[i]:offsets[i] + sizes[i]]`` converted by ``mode``, :data:`~shardstream.reading_accel.CONVERSIONS`;
    None where a value is not of the mode's simple form) when the accelerator is on; else None. The indexed layer's
    way to the extension (:mod:`shardstream._native`) for columns; its twin is the per-sample path and
    :meth:`~shardstream.codecs.Decoder.decode_columns`.

    >>> column_slicer() is None or callable(column_slicer())
    True
    """
    return getattr(_native.extension, "slice_column", None) if accelerated() else None


def iter_columns(ds: _Spans, batch_size: int, *, partial: bool = True) -> Iterator[dict[str, list]]:
    """Column batches of ``ds`` (see the module docstring); ``ds`` may decode with a ``Decoder``, nothing else."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    stages = ds.stages
    if len(stages) > 1 or (stages and not isinstance(stages[0], Decoder)):
        raise ConfigError("IndexedDataset.columns() decodes with one Decoder only (no map/transform, which run "
                          "per sample): batch iter(dataset) instead")  # fmt: skip
    decoder: Decoder | None = stages[0] if stages else None
    scan = column_slicer()
    batches = ColumnBatches(batch_size)
    for shard, rows in ds.shard_spans():
        layout = _Layout.of(shard) if scan is not None and rows.step == 1 else None
        if layout is None:
            yield from _per_sample(shard, rows, batches, decoder)
            continue
        pos, hi = rows.start, rows.stop
        while pos < hi:
            filled = len(next(iter(batches.columns.values()), ()))
            if batches.columns and batches.columns.keys() != layout.names:
                filled = 0  # this shard's rows end the batch: all of batch_size is free after it
            take = min(batch_size - filled, hi - pos)
            yield from _extend(batches, layout.chunk(scan, pos, pos + take, decoder))
            pos += take
    last = batches.flush()
    if last is not None and partial:
        yield last


def _per_sample(shard: Any, rows: range, batches: ColumnBatches, decoder: Decoder | None) -> Iterator[dict]:
    for i in rows:
        sample = shard.sample(i)
        done = batches.add(decoder(sample) if decoder is not None else sample)
        if done is not None:
            yield done


def _extend(batches: ColumnBatches, chunk: dict[str, list]) -> Iterator[dict[str, list]]:
    """Append ``chunk`` (rows that fit in the batch) as ColumnBatches.add would, sample by sample."""
    columns = batches.columns
    if columns and columns.keys() != chunk.keys():
        yield batches.flush()  # type: ignore[misc]
        columns = {}
    if not columns:
        batches.columns = columns = chunk
    else:
        for k, v in chunk.items():
            columns[k].extend(v)
    if len(next(iter(columns.values()))) >= batches.batch_size:
        yield batches.flush()  # type: ignore[misc]


class _Layout:
    """One shard whose samples all have the same fields in the same order: a column of offsets per field."""

    __slots__ = ("shard", "names", "fields", "key_offsets", "key_sizes", "buffer", "zero_copy")

    def __init__(self, shard: Any, fields: list[tuple[str, Any, Any]], key_offsets: Any, key_sizes: Any,
                 buffer: Any, zero_copy: bool):  # fmt: skip
        self.shard, self.fields, self.buffer, self.zero_copy = shard, fields, buffer, zero_copy
        self.key_offsets, self.key_sizes = key_offsets, key_sizes
        self.names = dict.fromkeys(["__key__", "__url__", *(name for name, _, _ in fields)]).keys()

    @classmethod
    def of(cls, shard: Any) -> _Layout | None:
        """The layout of an :class:`~shardstream.indexed.dataset.OpenShard` (cached on it), or None."""
        layout: Any = getattr(shard, "layout", False)
        if layout is False:
            layout = shard.layout = cls._build(shard, shard.zero_copy)
        return layout

    @classmethod
    def _build(cls, shard: Any, zero_copy: bool) -> _Layout | None:
        buffer = getattr(shard.source, "buffer", None)
        index: ShardIndex = shard.index
        n = len(index)
        if buffer is None or n == 0:
            return None
        starts = np.frombuffer(index.starts, dtype=np.uint32).astype(np.int64)
        counts = np.diff(starts)
        k = int(counts[0])
        if k == 0 or not (counts == k).all():
            return None
        ids = np.frombuffer(index.ext_ids, dtype=np.uint32)[starts[0] : starts[-1]].reshape(n, k)
        if not (ids == ids[0]).all():
            return None
        names = [index.extensions[i] for i in ids[0].tolist()]
        if len(set(names)) != k or any(name.startswith("__") for name in names):
            return None
        offsets = np.frombuffer(index.offsets, dtype=np.uint64)[starts[0] : starts[-1]].astype(np.int64).reshape(n, k)
        sizes = np.frombuffer(index.sizes, dtype=np.uint64)[starts[0] : starts[-1]].astype(np.int64).reshape(n, k)
        fields = [(name, np.ascontiguousarray(offsets[:, j]), np.ascontiguousarray(sizes[:, j]))
                  for j, name in enumerate(names)]  # fmt: skip
        key_ends = np.frombuffer(index.key_ends, dtype=np.uint32).astype(np.int64)
        return cls(shard, fields, key_ends[:-1].copy(), np.diff(key_ends), buffer, zero_copy)

    def chunk(self, scan: Any, lo: int, hi: int, decoder: Decoder | None) -> dict[str, list]:
        """Rows ``lo..hi`` of this shard (shard-local numbers) as decoded columns."""
        keys = scan(self.shard.index.key_bytes, self.key_offsets, self.key_sizes, lo, hi, _KEYS)
        chunk: dict[str, list] = {"__key__": keys, "__url__": [self.shard.url] * (hi - lo)}
        slow: dict[str, list] = {}
        for name, offsets, sizes in self.fields:
            kind = decoder.table_codec(name) if decoder is not None else ""
            mode = CONVERSIONS.get(kind) if kind else None
            column = scan(self.buffer, offsets, sizes, lo, hi, mode) if mode is not None else None
            if column is None:
                if self.zero_copy:
                    view = self.shard.source.view
                    column = [view(o, s) for o, s in zip(offsets[lo:hi].tolist(), sizes[lo:hi].tolist(), strict=True)]
                else:
                    column = scan(self.buffer, offsets, sizes, lo, hi, _BYTES)
                if kind != "":
                    slow[name] = column
            chunk[name] = column
        if slow:
            assert decoder is not None  # slow holds decoded fields only
            decoded = decoder.decode_columns({"__key__": keys, "__url__": chunk["__url__"], **slow})
            for name in slow:
                chunk[name] = decoded[name]
        return chunk
