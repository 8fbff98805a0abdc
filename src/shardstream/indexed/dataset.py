"""IndexedDataset: map-style random access (``len(ds)``, ``ds[i]``, ``ds.get(key)``, ``ds[a:b]``) over indexed shards.

A sample is the dict that streaming gives for it, ``{"__key__": key, "__url__": shard, ext: bytes, ...}``, read
at its offsets through a :class:`~shardstream.indexed.ByteSource` (local shards: a read-only memory map, so
fields come straight from the page cache). Fields are ``bytes`` (one copy out of the map); with
``zero_copy=True`` they are ``memoryview`` slices of the map (no copy; valid as long as you hold them).
Decoding uses the codec table of streaming (``decode="rgb"``, a :class:`~shardstream.codecs.Decoder`, or any
callable on a sample) and ``transform`` / :meth:`IndexedDataset.map` run after it.

A dataset is a picklable description: shard locations, sample counts and settings. Shard indexes and memory
maps are opened lazily, in the process that reads (each DataLoader worker opens its own; a forked worker
reopens them), and dropped from pickles. Each shard is checked against its index (size and fingerprint) when
it is first opened in a process: a changed shard raises :class:`~shardstream.errors.StaleIndexError`, never
returns wrong bytes.

>>> from shardstream.indexed import index_dataset, indexed_shard_writer
>>> with indexed_shard_writer("train-%03d.tar", maxcount=3) as sink:
...     for i in range(8):
...         _ = sink.write({"__key__": f"s{i:02d}", "txt": f"text {i}", "cls": i})
>>> _ = index_dataset(sink.shards, "train.json")
>>> ds = IndexedDataset("train.json", decode=True)
>>> len(ds), ds[-1]["__key__"], ds[4]["txt"], ds.get("s05")["cls"]
(8, 's07', 'text 4', 5)
>>> view = ds[2:6]
>>> len(view), [sample["cls"] for sample in view]
(4, [2, 3, 4, 5])
>>> raw = IndexedDataset(["train-000.tar", "train-001.tar"])
>>> raw[0]
{'__key__': 's00', '__url__': 'train-000.tar', 'cls': b'0', 'txt': b'text 0'}

Iterating (``for sample in ds``) gives the samples in order and is resumable like every recipe of shardstream
(``state_dict``, ``load_state_dict``, ``set_epoch``; see :mod:`~shardstream.indexed.rows`).
"""

from __future__ import annotations

import functools
import os
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import Any

import numpy as np

from ..codecs import Decoder, as_decoder
from ..errors import ConfigError, StaleIndexError, add_context
from ..samples import RuleSpec
from .columns import iter_columns
from .dataset_index import describe
from .opened import PACK_BUDGET, Handles, OpenShard, gather_rows, row_gatherer
from .rows import RowIteration, row_runs
from .shardindex import ShardIndex
from .source import open_source

__all__ = ["IndexedDataset"]

Stage = Callable[[dict], Any]


class IndexedDataset(RowIteration):
    """Random access to the samples of indexed shards (a ``torch.utils.data.Dataset``-style map).

    :param source: a dataset index file (``.json``, see :func:`~shardstream.indexed.index_dataset`), a
        :class:`~shardstream.indexed.DatasetIndex`, a shard path, or a list of shard paths (each with its sidecar)
    :param decode: ``None`` (fields stay bytes), ``True`` (the codec table), image spec(s) (``"rgb"``), a
        :class:`~shardstream.codecs.Decoder` or any callable sample -> sample
    :param transform: a callable sample -> anything, run after decoding
    :param rule: the key rule the indexes must have been built with (default: whatever they say)
    :param zero_copy: fields as ``memoryview`` slices of the memory map instead of ``bytes``
    :param verify: check each shard's size and fingerprint against its index when first opened in a process
    """

    def __init__(self, source: Any, *, decode: Any = None, transform: Stage | None = None, rule: RuleSpec = None,
                 zero_copy: bool = False, verify: bool = True):  # fmt: skip
        shards, loaded, origin = describe(source, rule)
        self._shards = tuple(shards)
        self._ends = list(accumulate(shard.samples for shard in shards))
        self._rows = range(self._ends[-1] if self._ends else 0)
        self._origin = origin
        self._stages = tuple(s for s in (as_decoder(decode), transform) if s is not None)
        self._zero_copy, self._verify = bool(zero_copy), bool(verify)
        self._handles = Handles(loaded)

    _pack = 0  # a budget of bytes for packed copies of small shards (see packed()); 0: read the maps

    # -- map-style access -----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self._derive(_rows=self._rows[i])
        try:
            row = self._rows[i]
        except IndexError:
            raise IndexError(f"sample index {i} is out of range for a dataset of {len(self._rows)} samples") from None
        except TypeError:
            raise TypeError(f"dataset indices must be integers or slices, not {type(i).__name__}") from None
        return self._finish(self._sample(row))

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> list[Any]:
        """``[self[i] for i in indices]`` (integers), with the shard lookups of a batch done once per shard; torch's
        ``DataLoader`` calls it for a whole batch. A batch of raw samples (no decoder or transform, fields as bytes)
        of memory-mapped shards is read in one call of the C extension (see :mod:`~shardstream.indexed.opened`).

        >>> ds = IndexedDataset("train.json")
        >>> ds.__getitems__([4, 0, -1]) == [ds[4], ds[0], ds[-1]]
        True
        """
        if not self._stages and not self._zero_copy and isinstance(indices, (np.ndarray, list)):  # one C call
            array = indices if isinstance(indices, np.ndarray) else np.asarray(indices)
            gathered = gather_rows(array, self._rows, self._ends_array, self._shard, self._here(), pack=self._pack)
            if gathered is not None:
                return gathered
        if isinstance(indices, np.ndarray):
            indices = indices.tolist()
        rows, ends, stages = self._rows, self._ends, self._stages
        shards: dict[int, OpenShard] = {}  # this batch's shards: one LRU lookup each
        limit, out = self._handles.open.limit // 2, []
        for i in indices:
            try:
                row = rows[i]
            except IndexError:
                raise IndexError(f"sample index {i} is out of range for a dataset of {len(rows)} samples") from None
            except TypeError:
                raise TypeError(f"dataset indices must be integers, not {type(i).__name__}") from None
            number = bisect_right(ends, row)
            shard = shards.get(number)
            if shard is None:
                if len(shards) >= limit:  # keep the open maps bounded (the LRU may have dropped these)
                    shards.clear()
                shard = shards[number] = self._shard(number)
            sample = shard.sample(row - shard.first)
            out.append(self._finish(sample) if stages else sample)
        return out

    @functools.cached_property
    def _ends_array(self) -> np.ndarray:
        return np.asarray(self._ends, dtype=np.int64)

    def collated(self, indices: np.ndarray) -> dict[str, list] | None:
        """``default_collation_fn(self.__getitems__(indices))`` made in one C call without the sample dicts,
        where it applies: raw samples (no decoder or transform, fields as bytes) of memory-mapped shards, every
        sample with the first one's fields in the same order; else None (collate the samples then).

        >>> import numpy as np
        >>> IndexedDataset("train.json").collated(np.array([4, 0]))["cls"] in ([b"4", b"0"], None)
        True
        """
        if self._stages or self._zero_copy or not isinstance(indices, np.ndarray):
            return None
        return gather_rows(indices, self._rows, self._ends_array, self._shard, self._here(), columns=True,
                           pack=self._pack)

    def collated_reader(self) -> Callable[[np.ndarray], dict[str, list] | None]:
        """:meth:`collated` for the batches of an epoch in this process, its look-ups done once, with the same
        results (see :func:`~shardstream.indexed.opened.row_gatherer`)."""
        if self._stages or self._zero_copy:
            return self.collated
        return row_gatherer(self._rows, self._ends_array, self._here(), True, self.collated)

    def packed(self, budget: int = PACK_BUDGET) -> IndexedDataset:
        """This dataset, whose batch reads (``__getitems__``, :meth:`collated`) read shards of small members from
        copies of their fields (:func:`~shardstream.indexed.opened.pack_table`, up to ``budget`` bytes a process):
        for readers of whole epochs at random positions (a global shuffle), which would map every page.

        >>> IndexedDataset("train.json").packed().__getitems__([4]) == [IndexedDataset("train.json")[4]]
        True
        """
        return self._derive(_pack=max(0, int(budget)))

    def sample_at(self, position: int) -> Any:
        """``self[position]`` for ``0 <= position < len(self)``, without the checks."""
        sample = self._sample(self._rows[position])
        return self._finish(sample) if self._stages else sample

    def position_reader(self) -> Callable[[int], Any]:
        """:meth:`sample_at` for positions read mostly in order (the iterator's path): the shard of the last
        position is kept, so a run of rows in one shard skips the shard lookup."""
        rows, ends, shards, stages, finish = self._rows, self._ends, self._shards, self._stages, self._finish
        current: list[Any] = [None, 0, 0]  # the shard, its first row, its end row

        def read(position: int) -> Any:
            row = rows[position]
            shard, first, end = current
            if shard is None or not first <= row < end:
                number = bisect_right(ends, row)
                shard, first, end = self._shard(number), ends[number] - shards[number].samples, ends[number]
                current[:] = shard, first, end
            sample = shard.sample(row - first)
            return finish(sample) if stages else sample

        return read

    def get(self, key: str) -> Any:
        """The sample with ``key`` (the first one, if shards repeat keys); KeyError if none in this dataset.

        Loads the index of every shard (once per process).
        """
        for number, shard in enumerate(self._shards):
            first = self._ends[number] - shard.samples
            if self._rows.step > 0 and (first >= self._rows.stop or self._ends[number] <= self._rows.start):
                continue
            try:
                row = first + self._index(number).find(key)
            except KeyError:
                continue
            if row in self._rows:
                return self._finish(self._sample(row))
        raise KeyError(key)

    @property
    def shard_lengths(self) -> list[int]:
        """How many consecutive samples of this dataset lie in one shard, run by run (for locality samplers).

        >>> ds = IndexedDataset("train.json")
        >>> ds.shard_lengths, ds[1:7].shard_lengths, ds[::-2].shard_lengths
        ([3, 3, 2], [2, 3, 1], [1, 2, 1])
        """
        return row_runs(self._rows, self._ends)

    def columns(self, batch_size: int, *, partial: bool = True) -> Iterator[dict[str, list]]:
        """The samples in order as column batches ``{field: [value, ...]}`` of ``batch_size`` rows, decoded column
        by column: the fast path for batches of small fields (see :mod:`shardstream.indexed.columns`).

        >>> batches = list(IndexedDataset("train.json", decode=True).columns(3))
        >>> [b["cls"] for b in batches], batches[1]["txt"]
        ([[0, 1, 2], [3, 4, 5], [6, 7]], ['text 3', 'text 4', 'text 5'])
        """
        return iter_columns(self, batch_size, partial=partial)

    @property
    def stages(self) -> tuple[Stage, ...]:
        """What is applied to each sample read, in order (the decoder, then the maps).

        >>> IndexedDataset("train.json", decode=True).map(len).stages[1] is len
        True
        """
        return self._stages

    def shard_spans(self) -> Iterator[tuple[OpenShard, range]]:
        """This dataset's samples, in order, as runs inside one shard: ``(shard, rows)``, ``rows`` the shard-local
        sample numbers of the run (a view with a step other than 1 gives a stepped range). The shard is opened in
        this process (see :class:`OpenShard`); the samples are not read.

        >>> [(shard.url, list(rows)) for shard, rows in IndexedDataset("train.json")[2:5].shard_spans()]
        [('train-000.tar', [2]), ('train-001.tar', [0, 1])]
        """
        rows, ends = self._rows, self._ends
        k, n = 0, len(rows)
        while k < n:
            row = rows[k]
            number = bisect_right(ends, row)
            first, end = ends[number] - self._shards[number].samples, ends[number]
            # the run: positions k .. j-1 of rows, all inside [first, end)
            if rows.step > 0:
                j = min(n, k + -(-(end - row) // rows.step))
            else:
                j = min(n, k + -(-(row - first + 1) // -rows.step))
            yield self._shard(number), range(row - first, rows[j - 1] - first + (1 if rows.step > 0 else -1),
                                             rows.step)
            k = j

    # -- fluent -----------------------------------------------------------------------------------------------

    def decode(
        self, *specs: Any, only: Any = None, partial: bool = False, allow_unsafe: bool = False
    ) -> IndexedDataset:
        """A new dataset that also decodes, as ``.decode(...)`` in streaming (``Decoder(*specs, ...)``)."""
        if len(specs) == 1 and isinstance(specs[0], Decoder):
            stage: Stage = specs[0]
        else:
            stage = Decoder(*specs, only=only, partial=partial, allow_unsafe=allow_unsafe)
        return self._derive(_stages=self._stages + (stage,))

    def map(self, fn: Stage) -> IndexedDataset:
        """A new dataset that also applies ``fn`` to each sample (after the stages so far)."""
        if not callable(fn):
            raise ConfigError(f"map needs a callable, not {fn!r}")
        return self._derive(_stages=self._stages + (fn,))

    def _derive(self, **changes: Any) -> IndexedDataset:
        new = object.__new__(type(self))  # not copy.copy: that would pickle, and drop the handles
        new.__dict__.update(self.__dict__, **changes)  # views share this process's maps and loaded indexes
        new._pending = new._progress = None  # a view starts its own iterations
        return new

    # -- reading ----------------------------------------------------------------------------------------------

    def _finish(self, sample: dict) -> Any:
        for stage in self._stages:
            try:
                sample = stage(sample)
            except Exception as e:
                if isinstance(sample, dict):
                    add_context(e, url=sample.get("__url__"), key=sample.get("__key__"))
                raise
        return sample

    def _sample(self, row: int) -> dict:
        shard = self._shard(bisect_right(self._ends, row))
        return shard.sample(row - shard.first)

    def _shard(self, number: int) -> OpenShard:
        return self._here().open.get(number) or self._open(number)

    def _here(self) -> Handles:
        """This process's handles (a forked worker never shares the parent's maps and file offsets)."""
        handles = self._handles
        if handles.pid != os.getpid():
            handles = self._handles = Handles()
        return handles

    def _index(self, number: int) -> ShardIndex:
        index = self._handles.indexes.get(number)
        if index is None:
            entry = self._shards[number]
            index = ShardIndex.load(entry.url, entry.index)
            said = (entry.samples, entry.size, entry.fingerprint)
            if (len(index), index.size, index.fingerprint) != said:
                raise StaleIndexError(
                    f"the dataset index {self._origin!r} does not match the index {entry.index!r} of shard "
                    f"{entry.url!r} (samples, size or fingerprint differ): the shard or its index changed "
                    "after the dataset index was written; rebuild it with "
                    "shardstream.indexed.index_dataset(shards, output)",
                    url=entry.url,
                )
            self._handles.indexes[number] = index
        return index

    def _open(self, number: int) -> OpenShard:
        entry, index = self._shards[number], self._index(number)
        source = open_source(entry.url)
        try:
            identity = getattr(source, "identity", None)
            if self._verify and (identity is None or self._handles.verified.get(number) != identity):
                also = None if self._origin is None else (
                    f"the dataset index {self._origin!r} lists this shard: rebuild it too, with "
                    "shardstream.indexed.index_dataset(shards, output) (it re-indexes changed shards)")  # fmt: skip
                index.check(source, entry.index, also=also)
                self._handles.verified[number] = identity
        except BaseException:
            source.close()
            raise
        first = self._ends[number] - entry.samples
        shard = self._handles.open[number] = OpenShard(first, index, source, self._zero_copy, entry.url)
        return shard

    def adopt(self, number: int, index: ShardIndex, identity: Any = None) -> None:
        """Use ``index``, just loaded, as the index of shard ``number`` in this process; ``identity`` (a byte
        source's ``identity``), when given, is the shard file it was just checked against: opening that same file
        skips the check (another file is checked). Saves loading and checking a shard twice.

        >>> ds = IndexedDataset(["train-000.tar"])
        >>> ds.adopt(0, ShardIndex.load("train-000.tar")); ds[0]["__key__"]
        's00'
        """
        handles = self._here()
        handles.indexes[number] = index
        if identity is not None:
            handles.verified[number] = identity

    def close(self) -> None:
        """Close the memory maps open in this process (they reopen on the next access)."""
        self._handles.close()

    def __enter__(self) -> IndexedDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_handles"] = None  # indexes and maps are reopened where the dataset is used
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._handles = Handles()

    def __repr__(self) -> str:
        where = self._origin or f"{len(self._shards)} shards"
        return f"IndexedDataset({where!r}, samples={len(self)})"

