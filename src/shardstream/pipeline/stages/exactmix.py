"""``ExactMix``: several datasets mixed with exact counts per epoch (not only in expectation).

``ExactMix(datasets, counts)`` yields, each epoch, exactly ``counts[i]`` items of dataset ``i`` (in all ranks and
workers together), in the order of :class:`~shardstream.pipeline.schedule.Schedule`: every source is spread
evenly over the epoch, the order is a function of ``(seed, epoch)``, and each of the ``parts`` = ranks x
DataLoader workers takes every ``parts``-th position, so all get the same number of items (``sum(counts) //
parts``). A dataset that runs out before its count is read again from its start (a new pass: a pipeline with
``shardshuffle`` or ``shuffle`` gives another order; a :class:`~shardstream.dataset.WebDataset` made with
``repeat=True`` never runs out). In a rank or worker each dataset gives its own part of its data (a WebDataset
deals its shards) and the mix takes from it what the schedule gives this part.

Resuming: the state is the schedule's position (the items taken from each dataset so far: nothing is replayed),
the passes over each dataset, and each dataset's own state. It restores where it was saved (the same rank and
worker), exactly: the rest of the epoch is the same, item for item.

>>> mix = ExactMix([["a"] * 10, ["b"] * 10, ["c"] * 10], counts=[6, 3, 1], seed=0)
>>> items = list(mix)
>>> [items.count(x) for x in "abc"], len(items)
([6, 3, 1], 10)
>>> mix.set_epoch(1); list(mix) != items  # another epoch, another order, the same counts
True
>>> it = iter(mix); first = [next(it) for _ in range(4)]; state = mix.state_dict()
>>> again = ExactMix(mix.datasets, counts=[6, 3, 1], seed=0); again.load_state_dict(state)
>>> list(again) == list(it)
True
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...errors import ConfigError, StateError
from ...resume.fields import ints, shown, within
from ..context import Context
from ..cursors import Cursor, require
from ..datapipeline import DataPipeline
from ..schedule import Schedule
from .multisource import MultiSource, SubCursors, saved_list

__all__ = ["ExactMix"]


class ExactMixSource(MultiSource):
    """The source of :class:`ExactMix`: the datasets and their counts per epoch."""

    name = "ExactMix"

    def __init__(self, datasets: Any, counts: Sequence[int]):
        super().__init__(datasets)
        counts = [int(c) for c in counts]
        if len(counts) != len(self.datasets) or any(c < 0 for c in counts) or sum(counts) == 0:
            raise ConfigError(f"ExactMix: give one count >= 0 per dataset ({len(self.datasets)}), with a positive "
                              f"sum; got {counts}")
        self.counts = counts

    def cursor(self, ctx: Context | None) -> Cursor:
        return _ExactCursor(self, ctx if ctx is not None else Context.current(seed=self.seed))

    def __repr__(self) -> str:
        return f"ExactMix([{', '.join(type(d).__name__ for d in self.datasets)}], counts={self.counts})"


class _ExactCursor(Cursor):
    def __init__(self, source: ExactMixSource, ctx: Context):
        self.source, self.ctx, self.name = source, ctx, source.name
        self.parts = ctx.world_size * ctx.num_workers
        self.part = ctx.rank * ctx.num_workers + ctx.worker
        self.schedule = Schedule(source.counts, ctx.seed, ctx.epoch)
        self.walk = self.schedule.walk(self.part, self.parts)
        self.passes = [0] * len(source.datasets)
        # not a bound method: the sub-cursors referring back to this cursor would make a reference cycle, which
        # keeps a dropped mix (and a spec's storage rules, which live as long as its shard lists) until a collection
        self.subs = SubCursors(source, ctx, functools.partial(_pass_context, ctx, self.passes))

    @property
    def restorable(self) -> bool:  # type: ignore[override]
        return self.subs.restorable

    @property
    def remaining(self) -> int:
        """Items this part still yields in this epoch."""
        return self.walk.remaining

    def __next__(self) -> Any:
        subs = self.subs.open()
        i = next(self.walk)
        try:
            return next(subs[i])
        except StopIteration:
            pass
        self.passes[i] += 1  # dataset i ran out: read it again from its start
        try:
            return next(self.subs.reopen(i))
        except StopIteration:
            raise ConfigError(f"ExactMix: dataset {i} ({type(self.source.datasets[i]).__name__}) has no item for "
                              f"this rank/worker (part {self.part} of {self.parts}); its count is "
                              f"{self.source.counts[i]}") from None

    def mark(self) -> Any:
        return self.walk.state(), tuple(self.passes), self.subs.marks()

    def state_at(self, mark: Any) -> dict[str, Any]:
        walk, passes, marks = mark
        return {"walk": walk, "passes": list(passes), "counts": list(self.source.counts),
                "part": [self.part, self.parts], "sources": self.subs.states(marks)}

    def state_dict(self) -> dict[str, Any]:
        return self.state_at(self.mark())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        name, count = self.name, len(self.source.datasets)
        state = require(state, ("walk", "passes", "counts", "part", "sources"), name)
        if _plain(state["counts"]) != self.source.counts or _plain(state["part"]) != [self.part, self.parts]:
            raise StateError(f"cannot restore {name}: the state was saved with counts {shown(state['counts'])} at "
                             f"part {shown(state['part'])}, this mix has counts {self.source.counts} at part "
                             f"{[self.part, self.parts]}")
        saved = saved_list(state, "sources", count, name)
        passes = ints(state, "passes", length=count, what=name)
        with within("walk"):
            walk = self.schedule.walk(self.part, self.parts, state=state["walk"])
        self.passes[:] = passes  # the same list: the sub-cursors' contexts read it
        self.subs.reset()  # reopened in the restored passes' contexts
        self.subs.restore(saved)
        self.walk = walk


def _pass_context(ctx: Context, passes: list[int], i: int) -> Context:
    """The context of dataset ``i``'s cursor: one per pass over the dataset."""
    return ctx.replace(cycle=(*ctx.cycle, passes[i]))


def _plain(value: Any) -> Any:
    """A list saved as a list or a tuple, as a list (anything else as it is)."""
    return list(value) if isinstance(value, (list, tuple)) else value


class ExactMix(DataPipeline):
    """Items of ``datasets`` with exactly ``counts[i]`` items of dataset ``i`` per epoch (module docstring).

    :param datasets: the datasets (WebDatasets, pipelines, lists: any iterables)
    :param counts: items of each dataset per epoch, over all ranks and workers
    :param seed: the schedule (and any random stage added to the mix) is a function of (seed, epoch)

    >>> [len(list(ExactMix([range(100), range(100, 200)], counts=[30, 10]).batched(8)))]
    [5]
    """

    def __init__(self, datasets: Iterable[Any], counts: Sequence[int], seed: int | str | None = None):
        super().__init__(ExactMixSource(datasets, counts), seed=seed)

    @property
    def datasets(self) -> list[Any]:
        """The mixed datasets."""
        return self.pipeline[0].datasets

    @property
    def counts(self) -> list[int]:
        """Items of each dataset per epoch."""
        return list(self.pipeline[0].counts)
