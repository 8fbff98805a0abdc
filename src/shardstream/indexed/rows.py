"""Iterating an :class:`~shardstream.indexed.IndexedDataset`: :class:`RowIterator`, a cursor over its rows in order.

``iter(ds)`` is resumable like every recipe of shardstream (:mod:`shardstream.resume`): the state is an envelope of
kind ``"indexed"`` whose fingerprint is the rows of the view (``[start, stop, step]``), the sample count and a
digest of the shards' names and sample counts, and whose position, ``"next"``, is how many rows of the view were
served. Restoring reads nothing again: the next row is read by random access.
``ds.cursor()`` gives the same iterator to a pipeline that has the dataset as its source (the pipeline keeps the
position; going back is cheap).

>>> from shardstream.indexed import IndexedDataset, indexed_shard_writer
>>> with indexed_shard_writer("rows-%03d.tar", maxcount=3) as sink:
...     for i in range(7):
...         _ = sink.write({"__key__": f"r{i}", "cls": i})
>>> ds = IndexedDataset(sink.shards, decode=True)
>>> it = iter(ds); _ = next(it), next(it); state = ds.state_dict()
>>> state["kind"], state["next"], state["fingerprint"]["rows"]
('indexed', 2, [0, 7, 1])
>>> again = IndexedDataset(sink.shards, decode=True); again.load_state_dict(state)
>>> [sample["cls"] for sample in again]
[2, 3, 4, 5, 6]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..resume import Resumable, check_state, digest, envelope
from ..resume.fields import field

if TYPE_CHECKING:  # pragma: no cover
    from ..resume import Progress
    from .dataset_index import ShardEntry

__all__ = ["RowIteration", "RowIterator", "fingerprint", "row_runs", "shards_digest"]


def fingerprint(rows: range, shards: Sequence[tuple[str, int]] | str) -> dict[str, Any]:
    """What a state of an iteration over ``rows`` of ``shards`` (``(url, samples)`` pairs) must agree with: the rows,
    their count, and a digest of the shards' file names (not their directories: data may move) and sample counts
    (``shards`` may be that digest, :func:`shards_digest`, computed once).

    >>> fingerprint(range(2, 5), [("/data/a.tar", 3), ("/data/b.tar", 4)])["rows"]
    [2, 5, 1]
    """
    shard_digest = shards if isinstance(shards, str) else shards_digest(shards)
    return {"rows": [rows.start, rows.stop, rows.step], "samples": len(rows), "shards": shard_digest}


def shards_digest(shards: Sequence[tuple[str, int]]) -> str:
    """The number of ``shards`` and a digest of their file names and sample counts, as ``"N:digest"``.

    >>> shards_digest([("/data/a.tar", 3)]) == shards_digest([("/elsewhere/a.tar", 3)]), shards_digest([])[:2]
    (True, '0:')
    """
    names = ((url.replace("\\", "/").rsplit("/", 1)[-1], int(samples)) for url, samples in shards)
    return f"{len(shards)}:{digest(names)}"


class RowIterator:
    """The rows of ``dataset`` from position ``start`` (``dataset[start]``, ``dataset[start + 1]``...), epoch
    ``epoch``, with ``state_dict()`` / ``load_state_dict()`` and the cursor protocol (``mark``, ``state_at``)."""

    restorable = True  # random access: any earlier position is as cheap as the next one

    def __init__(self, dataset: RowIteration, epoch: int, start: int = 0):
        self.dataset, self.epoch, self.next = dataset, epoch, start
        self.progress: Progress | None = None  # the dataset's record of this iteration (None under a pipeline)
        self._read, self._length, self._unstarted = dataset.position_reader(), len(dataset), True

    def __iter__(self) -> RowIterator:
        return self

    def __next__(self) -> Any:
        n = self.next
        if n >= self._length:
            raise StopIteration
        item = self._read(n)
        self.next = n + 1
        if self._unstarted:
            self._unstarted = False
            if self.progress is not None:
                self.progress.start()  # the dataset's next iteration is the next epoch
        return item

    def state_dict(self) -> dict[str, Any]:
        """Where this iteration is; once every row was served, the start of the next epoch."""
        return self.state_at(self.next)

    def mark(self) -> int:
        return self.next

    def state_at(self, mark: int) -> dict[str, Any]:
        if mark >= self._length and self.progress is not None:
            return self.dataset.state_for(self.epoch + 1, 0)
        return self.dataset.state_for(self.epoch, mark)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (checked against the dataset: see :meth:`IndexedDataset.resume_point`)."""
        self.epoch, self.next = self.dataset.resume_point(state)

    def close(self) -> None:
        """Nothing to release: the dataset's memory maps stay open for it (``dataset.close()`` closes them)."""


class RowIteration(Resumable):
    """What makes :class:`~shardstream.indexed.IndexedDataset` an iterable recipe (see the module docstring): its
    rows (``_rows``, a range over the dataset's samples) and shards (``_shards``) are the fingerprint,
    :meth:`sample_at` reads one row."""

    _rows: range
    _shards: tuple[ShardEntry, ...]
    _shards_digest: str

    def __len__(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample_at(self, position: int) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def position_reader(self) -> Callable[[int], Any]:
        """A reader of positions for one iteration (default: :meth:`sample_at`; a dataset may keep what the last
        position opened)."""
        return self.sample_at

    def __iter__(self) -> RowIterator:
        pending = self._take_pending()
        epoch, start = (self._epoch, 0) if pending is None else self.resume_point(pending)
        iterator = RowIterator(self, epoch, start)
        iterator.progress = self._begin(epoch, iterator)
        return iterator

    def cursor(self, ctx: Any = None) -> RowIterator:
        """The rows from the first, for a pipeline that has this dataset as its source (the pipeline keeps the
        position; this dataset's own ``state_dict()`` is not involved)."""
        return RowIterator(self, self._epoch if ctx is None else int(ctx.epoch))

    @property
    def fingerprint(self) -> dict[str, Any]:
        """What a state of this dataset's iteration must agree with (see :func:`fingerprint`).

        >>> from shardstream.indexed import IndexedDataset
        >>> IndexedDataset(["rows-000.tar", "rows-001.tar", "rows-002.tar"])[2:].fingerprint["rows"]
        [2, 7, 1]
        """
        shards = self.__dict__.get("_shards_digest")  # the same for every view: computed once, shared by views
        if shards is None:
            shards = self._shards_digest = shards_digest([(shard.url, shard.samples) for shard in self._shards])
        return fingerprint(self._rows, shards)

    def state_for(self, epoch: int, position: int) -> dict[str, Any]:
        """The state of an iteration of epoch ``epoch`` that served ``position`` rows (the next one is
        ``self[position]``).

        >>> from shardstream.indexed import IndexedDataset
        >>> IndexedDataset("rows-000.tar").state_for(0, 3)["next"]
        3
        """
        return envelope("indexed", self.fingerprint, epoch, next=int(position))

    def resume_point(self, state: Any) -> tuple[int, int]:
        """``(epoch, position)`` where ``state`` continues; a state of another view, dataset or format raises a
        :class:`~shardstream.errors.StateError` naming every difference."""
        check_state(state, "indexed", self.fingerprint, "this dataset", keys=("next",))
        position = field(state, "next", int, lo=0, hi=len(self._rows), what="this dataset")
        return int(state["epoch"]), position

    def _initial_state(self) -> dict[str, Any]:
        return self.state_for(self._epoch, 0)

    def _check_state(self, state: Any) -> None:
        self.resume_point(state)


def row_runs(rows: range, ends: Sequence[int]) -> list[int]:
    """Lengths of the runs of ``rows`` (global sample numbers, in order) that fall in one shard."""
    if rows.step < 0:
        return row_runs(rows[::-1], ends)[::-1]
    runs, start, n = [], 0, len(rows)
    for end in ends:
        lo = min(n, max(0, -((rows.start - start) // rows.step)))  # first k with rows[k] >= start
        hi = min(n, max(0, -((rows.start - end) // rows.step)))
        if hi > lo:
            runs.append(hi - lo)
        start = end
    return runs
