"""The cursors of a training epoch: readers of positions, and :class:`PlanIterator`, the stateful batch iterator.

- :class:`IndexedReader` reads the samples at positions of a :class:`~shardstream.order.SampleOrder`
  by random access (an :class:`~shardstream.indexed.IndexedDataset`: memory maps of local shards; shards of
  small samples as packed copies of their fields, see :meth:`~shardstream.indexed.IndexedDataset.packed`).
- :class:`StreamReader` reads positions of a :class:`~shardstream.order.StreamOrder` front to back:
  it keeps the ``window`` shards of the current group open, reads one block of ``buffer`` samples at a time and
  serves it in the block's permuted order. The remote shards a block opens are opened ahead, several at once
  (:mod:`~shardstream.training.ahead`), so a block over many small shards does not wait one round trip per shard.
  Jumping to a position (a resumed epoch) reopens the current shards and skips their first samples: only those
  shards' prefixes are read again, never the rest of the epoch.
- :class:`PlanIterator` produces one worker's batches of an :class:`~shardstream.training.plan.EpochPlan` and
  says where it is with ``state_dict()`` (torchdata's ``Stateful`` protocol).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ShardError, StateError
from ..indexed import IndexedDataset
from ..order import SampleOrder, StreamOrder
from ..pipeline.cursors import Cursor, require
from ..pipeline.stages import reading
from .ahead import ShardsAhead
from .plan import EpochPlan

__all__ = ["IndexedReader", "PlanIterator", "StreamReader"]


class IndexedReader:
    """Samples at positions of ``order``, read from ``dataset`` by random access.

    The sample numbers are computed ``block`` positions at a time (one vectorised call of the order for many
    batches: a small batch costs numpy's per-call overhead many times over) and kept for the batches that follow:
    a block starts at the first position that the cache lacks, so an epoch read forward computes each position once
    (but for the few batches that straddle two blocks).
    """

    def __init__(self, dataset: IndexedDataset, order: SampleOrder, block: int = 8192):
        self.dataset, self.order, self.block = dataset, order, block
        self._first, self._ids = 0, np.zeros(0, dtype=np.int64)  # the cached block: ids of _first, _first + 1...
        self._collated: Any = None  # the dataset's collated_reader(), made here at the first batch of columns

    def read(self, positions: np.ndarray) -> list[Any]:
        return self.dataset.__getitems__(self.ids(positions))

    def read_range(self, span: range) -> list[Any]:
        """``read`` of the positions ``span`` (a non-empty range)."""
        return self.dataset.__getitems__(self._span_ids(span))

    def read_columns(self, span: range) -> dict[str, list] | None:
        """The samples of ``span`` as the default collation makes them, when the dataset makes them at once
        (:meth:`~shardstream.indexed.IndexedDataset.collated`); else None."""
        read = self._collated
        if read is None:
            read = self._collated = self.dataset.collated_reader()
        ids = self._span_ids(span)
        return read(ids if span.step == 1 else np.ascontiguousarray(ids))

    def _span_ids(self, span: range) -> np.ndarray:
        """``ids(positions of span)``: a slice of the cached block when it holds them."""
        first, ids = self._first, self._ids
        if not (first <= span.start and span[-1] < first + len(ids)):
            return self.ids(np.arange(span.start, span.stop, span.step, dtype=np.int64))
        return ids[span.start - first : span.stop - first : span.step]

    def ids(self, positions: np.ndarray) -> np.ndarray:
        """``order.ids(positions)``, from the cached block when the positions lie in it."""
        if positions.size == 0:
            return self.order.ids(positions)
        lo, hi = int(positions.min()), int(positions.max())
        first, ids = self._first, self._ids
        if not (first <= lo and hi < first + len(ids)):
            if hi - lo >= self.block or lo < 0 or hi >= self.order.total:  # wider than a block, or an error
                return self.order.ids(positions)
            first, end = lo, min(lo + self.block, self.order.total)  # from the first position asked: batches go forward
            self._first, self._ids = first, ids = first, self.order.ids(np.arange(first, end, dtype=np.int64))
        return ids[positions - first]

    def close(self) -> None:
        pass


class _Open:
    """One shard read front to back: its chunks of samples (lists), the current chunk, the next sample's index in
    it (``at``), and the number of samples before the current chunk (``before``)."""

    __slots__ = ("chunks", "chunk", "at", "before")

    def __init__(self, chunks: Iterator[list[dict]]):
        self.chunks, self.at, self.before = chunks, 0, 0
        self.chunk: list[dict] = []

    @property
    def next(self) -> int:
        """The index in the shard of the next sample."""
        return self.before + self.at

    def more(self) -> bool:
        """Move to the next chunk; False at the end of the shard."""
        for chunk in self.chunks:
            if chunk:
                self.before += len(self.chunk)
                self.chunk, self.at = chunk, 0
                return True
        return False

    def close(self) -> None:
        self.chunks.close()  # type: ignore[attr-defined]


class StreamReader:
    """Samples at positions of a :class:`StreamOrder`, read by streaming ``urls`` (see the module docstring).

    ``open_ahead``: the most remote shards opened ahead at once (None: the process's share of the HTTP connection
    budget; 0: none, each shard opened when it is first read)."""

    def __init__(self, urls: Sequence[str], order: StreamOrder, *, rule: Any = None,
                 opener: Callable[[str], Any] | None = None, open_ahead: int | None = None):
        self.urls, self.order, self.rule, self.opener = urls, order, rule, opener
        self._ahead = ShardsAhead(urls, opener, open_ahead)
        self._open: collections.OrderedDict[int, _Open] = collections.OrderedDict()
        self._block = -1
        self._samples: list[Any] = []  # the current block, in serving order

    def read_range(self, span: range) -> list[Any]:
        """``read`` of the positions ``span`` (a non-empty range): a slice of the block when it holds them."""
        size = self.order.buffer
        block = span.start // size
        if block != span[-1] // size:
            return self.read(np.arange(span.start, span.stop, span.step, dtype=np.int64))
        if block != self._block:
            self._load(block)
        at = block * size
        return self._samples[span.start - at : span.stop - at : span.step]

    def read(self, positions: np.ndarray) -> list[Any]:
        size = self.order.buffer
        if positions.size and int(positions.min()) // size == int(positions.max()) // size:  # inside one block
            block = int(positions[0]) // size
            if block != self._block:
                self._load(block)
            samples = self._samples
            return [samples[k] for k in (positions - block * size).tolist()]
        out = []
        for position in positions.tolist():
            block, offset = divmod(position, size)
            if block != self._block:
                self._load(block)
            out.append(self._samples[offset])
        return out

    def _load(self, block: int) -> None:
        """Read block ``block``: each run of a group takes from each of its shards the samples it needs, at once
        (its streams opened in the order the run first reads them); the block's samples, interleaved as the
        labels say and served in the block's order, are then picked in one pass."""
        self._samples = []  # release the previous block before reading the next one
        order, taken, where = self.order, [], []
        lo, hi = block * order.buffer, min((block + 1) * order.buffer, order.total)
        runs = []
        for group, before, labels in order.runs(lo, hi):
            shards = order.group_shards(group).tolist()
            present, first = np.unique(labels, return_index=True)
            runs.append((shards, before.tolist(), labels, present[np.argsort(first)].tolist()))
        if self._ahead.enabled:  # the shards this block opens, in the order it reads them (the sorted labels)
            self._ahead.plan(shards[label] for shards, counts, _, present in runs for label in sorted(present)
                             if self._reopens(shards[label], counts[label]))
        at = 0  # the run's first position in the block
        for shards, counts, labels, present in runs:
            need = np.bincount(labels, minlength=len(shards)).tolist()
            opened = {label: self._seek(shards[label], counts[label]) for label in present}
            for label in sorted(opened):
                taken.extend(self._take(opened[label], need[label], shards[label]))
            where.append(at + np.argsort(labels, kind="stable"))  # the block positions of taken, in its order
            at += len(labels)
        pick = np.empty(at, dtype=np.int64)  # block position -> index in taken
        if at:
            pick[np.concatenate(where)] = np.arange(at, dtype=np.int64)
        served = pick[order.block_order(block)].tolist()
        self._block, self._samples = block, [taken[k] for k in served]

    def _take(self, stream: _Open, count: int, shard: int) -> list[Any]:
        """The next ``count`` samples of ``stream`` (of ``shard``)."""
        out: list[Any] = []
        while count > 0:
            left = len(stream.chunk) - stream.at
            if left <= 0:
                if not stream.more():
                    self._ended(shard, stream)
                continue
            n = min(left, count)
            out.extend(stream.chunk[stream.at : stream.at + n])
            stream.at += n
            count -= n
        return out

    def _reopens(self, shard: int, index: int) -> bool:
        """Whether :meth:`_seek` opens ``shard`` to read from sample ``index`` (it is not open before it)."""
        stream = self._open.get(shard)
        return stream is None or stream.next > index

    def _seek(self, shard: int, index: int) -> _Open:
        """The open stream of ``shard`` at sample ``index``: read on from where it is, or reopen it and skip."""
        stream = self._open.get(shard)
        if stream is None or stream.next > index:
            if stream is not None:
                stream.close()
            stream = self._reopen(shard)
        self._open.move_to_end(shard)
        while stream.next < index:
            left = len(stream.chunk) - stream.at
            if left <= 0:
                if not stream.more():
                    self._ended(shard, stream)
                continue
            stream.at += min(left, index - stream.next)
        return stream

    def _ended(self, shard: int, stream: _Open) -> None:
        raise ShardError(f"shard {self.urls[shard]!r} ended after {stream.next} samples, but the dataset "
                         f"says it has {self.order.lengths[shard]}: pass its true sample count in lengths=, "
                         "or rebuild the dataset index", url=self.urls[shard])

    def _reopen(self, shard: int) -> _Open:
        while len(self._open) > self.order.window:  # the current group's streams stay open
            _, oldest = self._open.popitem(last=False)
            oldest.close()
        opener = self._ahead.opener_for(shard) if self._ahead.enabled else self.opener  # opened when first read
        chunks = reading.tarfile_chunks([self.urls[shard]], keys=self.rule, opener=opener)
        stream = self._open[shard] = _Open(chunks)
        return stream

    def close(self) -> None:
        for stream in self._open.values():
            stream.close()
        self._open.clear()
        self._ahead.close()
        self._samples = []


class PlanIterator:
    """Batches of one rank's (and one DataLoader worker's) share of an epoch plan, with ``state_dict()``.

    ``dataset`` is the :class:`~shardstream.training.TrainingDataset` that made it (it reads, decodes, collates
    and describes its configuration); the iterator produces batches ``next, next + num_workers, ...``.
    """

    def __init__(self, dataset: Any, epoch: int, plan: EpochPlan, rank: int, worker: int, num_workers: int,
                 next_batch: int | None = None):
        self.dataset, self.epoch, self.plan = dataset, epoch, plan
        self.rank, self.worker, self.num_workers = rank, worker, num_workers
        self._next = plan.skip + worker if next_batch is None else next_batch
        self._reader: Any = None
        self._columns = False  # the reader makes the batches' columns (see TrainingDataset.collates_raw)
        self._done = self._started = False
        self.progress: Any = None  # the dataset's record of this iteration (a shardstream.resume.Progress)

    def __iter__(self) -> PlanIterator:
        return self

    def __next__(self) -> Any:
        if not self._started:  # the dataset moves on to the next epoch once this one is being served
            self._started = True
            if self.progress is not None:
                self.progress.start()
        j = self._next
        if j >= self.plan.num_batches:
            self._finish()
            raise StopIteration
        reader = self._reader
        if reader is None:
            reader = self._reader = self.dataset.reader(self.epoch)
            self._columns = self.dataset.collates_raw and isinstance(reader, IndexedReader)
        span = self.plan.position_range(self.rank, j)  # one run of the order (nearly every batch): a slice
        if span is not None and self._columns:  # raw samples, default collation: the columns at once
            batch = reader.read_columns(span)
            if batch is not None:
                self._next = j + self.num_workers
                return batch
        samples = reader.read(self.plan.positions(self.rank, j)) if span is None else reader.read_range(span)
        self._next = j + self.num_workers
        return self.dataset.make_batch(samples)

    def _finish(self) -> None:
        self._done = True
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def close(self) -> None:
        """Release open shards (the iterator can still report its state)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    @property
    def remaining(self) -> int:
        """Batches this iterator still produces."""
        return len(range(self._next, self.plan.num_batches, self.num_workers))

    def state_dict(self) -> dict[str, Any]:
        """Where this iterator is: a rank state outside DataLoader workers, a worker state inside them.
        Once the epoch is over, the start of the next epoch."""
        if self._done or self._next >= self.plan.num_batches and self.num_workers == 1:
            return self.dataset.start_state(self.epoch + 1, rank=self.rank, world_size=self.plan.world_size,
                                            worker=self.worker, num_workers=self.num_workers)
        return self.dataset.state_for(self.epoch, self.plan, self._next, rank=self.rank, worker=self.worker,
                                      num_workers=self.num_workers)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (before the first batch only: torchdata restores workers that way)."""
        epoch, plan, next_batch = self.dataset.resume_point(state, rank=self.rank, world_size=self.plan.world_size,
                                                            worker=self.worker, num_workers=self.num_workers)
        if next_batch is None:
            next_batch = plan.skip + self.worker
        if self._reader is not None:
            raise StateError("load_state_dict() on an iterator that has started: restore the dataset or loader "
                             "before iterating")
        self.epoch, self.plan, self._next, self._done = epoch, plan, next_batch, False


class DatasetCursor(Cursor):
    """A :class:`~shardstream.training.TrainingDataset` as the source of a pipeline or a mix
    (``TrainingDataset.cursor``): its iterator starts at once, saves itself under ``"source"`` and restores
    through the dataset. An iterator with nothing left is saved as ended (``None``): its own state would already
    be the start of the next epoch. Going back is not cheap (``restorable`` is False)."""

    restorable = False

    def __init__(self, dataset: Any, name: str):
        self.dataset, self.name, self.it = dataset, name, iter(dataset)

    def __next__(self) -> Any:
        return next(self.it)

    def state_dict(self) -> dict[str, Any]:
        if getattr(self.it, "remaining", None) == 0:
            return {"source": None}
        return {"source": self.it.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = require(state, ("source",), self.name)["source"]
        if saved is None:
            self.it = iter(())
        else:
            self.dataset.load_state_dict(saved)
            self.it = iter(self.dataset)
