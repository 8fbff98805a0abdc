"""Sources over several datasets (the mixes, ``ExactMix``, ``Join``): the one bookkeeping of their datasets' cursors.

A :class:`MultiSource` holds the datasets and hands its epoch on to them. Its cursor keeps a :class:`SubCursors`:
the datasets' cursors, opened together at their first use (after the epoch is handed on, unless a DataLoader
seeds the pass), each in its own context (the source's, or one per pass over a dataset read again), saved as one
list (``None`` for a dataset left out, such as an exhausted one) and restored from such a list, each under its
path in the errors (``sources/1/...``) once the list's length is checked (:func:`saved_list`, :func:`restore_each`).

>>> from shardstream.pipeline.context import Context
>>> class Both(MultiSource):
...     name = "Both"
>>> subs = SubCursors(Both([range(3), "ab"]), Context())
>>> [next(c) for c in subs.open()], subs.states(subs.marks())
([0, 'a'], [{'items': 1}, {'items': 1}])
>>> subs.restore(saved_list({"sources": [{"items": 2}, None]}, "sources", 2, "Both"), skip={1})
>>> next(subs.open()[0])
2
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from ...errors import ConfigError, StateError
from ...resume.fields import field, within
from ..adapters import source_cursor
from ..context import Context, Source
from ..cursors import Cursor

__all__ = ["MultiSource", "SubCursors", "dataset_cursor", "restore_each", "saved_list"]


def _datasets(datasets: Any, what: str) -> list[Any]:
    if isinstance(datasets, (str, bytes, Mapping)) or not isinstance(datasets, Iterable):
        raise ConfigError(f"{what} needs a list of datasets, not {datasets!r}")
    datasets = list(datasets)
    if not datasets:
        raise ConfigError(f"{what} needs at least one dataset; the list is empty")
    return datasets


def dataset_cursor(dataset: Any, i: int, ctx: Context) -> Cursor:
    """The cursor of dataset ``i`` of a multi-dataset source (each kind of dataset saves its position its own way).

    >>> dataset_cursor([5, 6], 0, Context()).state_dict()
    {'items': 0}
    """
    if isinstance(dataset, Source):  # a shard list: the source's context, its own draws
        here = ctx.replace(cycle=(*ctx.cycle, i))
        return source_cursor(dataset, lambda: dataset.iterate(here), here)
    # a pipeline or a TrainingDataset (their own cursor), a list, a stateful loader, another iterable
    return source_cursor(dataset, lambda: iter(dataset))


class MultiSource(Source):
    """A source over several datasets: it checks the list (its ``name`` in the errors) and hands its epoch on.

    >>> MultiSource([range(2), range(3)]).datasets
    [range(0, 2), range(0, 3)]
    """

    name = "sources"

    def __init__(self, datasets: Any):
        self.datasets = _datasets(datasets, self.name)

    def set_epoch(self, epoch: int) -> None:
        """Hand ``epoch`` to every dataset that has a ``set_epoch``."""
        for dataset in self.datasets:
            if callable(getattr(dataset, "set_epoch", None)):
                dataset.set_epoch(epoch)

    def iterate(self, ctx: Context) -> Cursor:
        return self.cursor(ctx)


class SubCursors:
    """The cursors of a :class:`MultiSource`'s datasets, for its cursor (see the module docstring).

    :param here: the context of dataset ``i``'s cursor (default: ``ctx``), asked again when it is reopened
    """

    def __init__(self, source: MultiSource, ctx: Context, here: Callable[[int], Context] | None = None):
        self.source, self.ctx, self._here = source, ctx, here
        self._cursors: list[Cursor] | None = None

    def _cursor(self, i: int) -> Cursor:
        return dataset_cursor(self.source.datasets[i], i, self.ctx if self._here is None else self._here(i))

    def open(self) -> list[Cursor]:
        """The cursors, opened at the first call."""
        if self._cursors is None:
            if self.ctx.loader_seed is None:  # the epoch means something (set, pushed, or counted here)
                self.source.set_epoch(self.ctx.epoch)
            self._cursors = [self._cursor(i) for i in range(len(self.source.datasets))]
        return self._cursors

    def reopen(self, i: int) -> Cursor:
        """Dataset ``i`` read again from its start (a new cursor in its context of now)."""
        cursors = self.open()
        cursors[i] = self._cursor(i)
        return cursors[i]

    def reset(self) -> None:
        """Forget the cursors: the next :meth:`open` opens them all again (the epoch handed on again)."""
        self._cursors = None

    @property
    def restorable(self) -> bool:
        """Whether every cursor can restore a state."""
        return all(cursor.restorable for cursor in self.open())

    def marks(self, skip: Collection[int] = ()) -> list[Any]:
        """Each cursor's mark (None for the datasets in ``skip``)."""
        return [None if i in skip else cursor.mark() for i, cursor in enumerate(self.open())]

    def states(self, marks: Sequence[Any]) -> list[Any]:
        """The states at ``marks`` (None where the mark is None)."""
        return [None if m is None else c.state_at(m) for c, m in zip(self.open(), marks, strict=True)]

    def restore(self, saved: Sequence[Any], key: str = "sources", skip: Collection[int] = ()) -> None:
        """Restore each cursor from ``saved`` (see :func:`restore_each`)."""
        restore_each(self.open(), saved, key, skip)


def saved_list(state: Mapping[str, Any], key: str, count: int, what: str, noun: str = "datasets") -> list[Any]:
    """The list of per-dataset states at ``state[key]``, refused with a StateError unless it has ``count`` items.

    >>> saved_list({"sources": [{}]}, "sources", 2, "RoundRobin")
    Traceback (most recent call last):
    ...
    shardstream.errors.StateError: cannot restore RoundRobin: the state has 1 datasets ('sources'), this RoundRobin has 2
    """
    saved = field(state, key, list, what=what)
    if len(saved) != count:
        raise StateError(f"cannot restore {what}: the state has {len(saved)} {noun} ({key!r}), this {what} has {count}")
    return saved


def restore_each(cursors: Sequence[Any], saved: Sequence[Any], key: str = "sources",
                 skip: Collection[int] = ()) -> None:
    """``cursors[i].load_state_dict(saved[i])`` for each ``i`` not in ``skip``, with the path ``key/i`` in errors."""
    for i, (cursor, state) in enumerate(zip(cursors, saved, strict=True)):
        if i not in skip:
            with within(key, i):
                cursor.load_state_dict(state)
