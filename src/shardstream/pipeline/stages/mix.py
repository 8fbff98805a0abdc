"""Mixing datasets: ``RandomMix`` (weighted random draws) and ``RoundRobin`` (in turn), webdataset's names and meanings.

``RandomMix(datasets, probs)`` yields, item after item, the next item of a dataset drawn at random with the
probabilities ``probs`` (weights, normalised: ``[3, 1]`` is ``[0.75, 0.25]``; equal by default). ``RoundRobin``
takes one item of each dataset in turn. With ``longest=False`` (the default) the mix ends the first time a chosen
dataset has nothing left; with ``longest=True`` it goes on with the others (``RandomMix`` renormalises their weights)
until all are exhausted. A dataset of weight 0 is never drawn.

A mix is a :class:`~shardstream.pipeline.DataPipeline`: it has the fluid methods
(``RandomMix(...).shuffle(1000).batched(64)``), it is a ``torch.utils.data.IterableDataset``, and it can be the
source of another pipeline. The datasets are anything iterable: ``WebDataset``s, pipelines, ``TrainingDataset``s,
lists. In a DataLoader worker each dataset splits its data between the workers as it would alone (a
``WebDataset`` deals its shards: each needs at least as many shards as workers, or ``resampled=True``), and each
worker mixes its own parts.

Determinism: the draws come from ``Context.rng`` (no global random state), a function of ``(seed, epoch, rank,
worker)``; ``seed`` defaults to 0. ``set_epoch(n)`` sets the mix's epoch and the datasets' (each iteration hands
its epoch to the datasets, so their own shuffles follow it), and another epoch draws another order.

Resuming: the mix's state is the number of draws, which datasets are exhausted, and each dataset's own state
(under ``"sources"``). Restoring regenerates the random draws (at most a few hundred; nothing is read for them)
and restores each dataset from its own state. As for any streaming pipeline, a state restores at the rank and
worker that saved it (torchdata's ``StatefulDataLoader`` saves each worker's).

>>> list(RoundRobin([range(3), range(10, 15)]))
[0, 10, 1, 11, 2, 12]
>>> list(RoundRobin([range(3), range(10, 15)], longest=True))
[0, 10, 1, 11, 2, 12, 13, 14]
>>> mix = RandomMix([["a"] * 10_000, ["b"] * 10_000], probs=[3, 1], seed=0)
>>> mix.probs
[0.75, 0.25]
>>> items = list(mix)  # until the first draw from an exhausted dataset (the "a"s run out first)
>>> 0.73 < items.count("a") / len(items) < 0.77, items == list(RandomMix(mix.datasets, [3, 1], seed=0))
(True, True)
>>> mix.set_epoch(1); items == list(mix)  # another epoch, another order
False
>>> sorted(RandomMix([range(3), range(10, 14)], longest=True))  # every item of every dataset, once
[0, 1, 2, 10, 11, 12, 13]
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

from ...errors import ConfigError, StateError
from ...resume.fields import MAX_COUNT, field, ints, refuse, shown
from ..context import Context
from ..cursors import Cursor, require
from ..datapipeline import DataPipeline
from .multisource import MultiSource, SubCursors, saved_list

__all__ = ["RandomMix", "RoundRobin"]

#: draws per random generator: restoring a mix regenerates fewer than this many draws
BLOCK = 256


def _weights(probs: Sequence[Any] | None, count: int) -> list[float]:
    """``probs`` checked and normalised to sum 1 (None: equal weights)."""
    if probs is None:
        return [1 / count] * count
    if isinstance(probs, (str, bytes)) or not isinstance(probs, Iterable):
        raise ConfigError(f"RandomMix: probs must be a list of numbers (one weight per dataset), not {probs!r}")
    probs = list(probs)
    if len(probs) != count:
        raise ConfigError(f"RandomMix: {len(probs)} probs for {count} datasets; give one weight per dataset")
    for i, p in enumerate(probs):
        if isinstance(p, bool) or not isinstance(p, Real) or not math.isfinite(p) or p < 0:
            raise ConfigError(f"RandomMix: probs[{i}] is {p!r}; weights must be finite numbers >= 0")
    total = math.fsum(probs)
    if total <= 0:
        raise ConfigError(f"RandomMix: the probs {probs!r} sum to 0; at least one weight must be positive")
    return [float(p) / total for p in probs]


class _MixSource(MultiSource):
    """The source of a mixing pipeline: the datasets, and how the next one is chosen (see the module docstring)."""

    name = "mix"

    def __init__(self, datasets: Any, longest: bool):
        super().__init__(datasets)
        self.longest = bool(longest)

    def __repr__(self) -> str:
        kinds = ", ".join(type(d).__name__ for d in self.datasets)
        return f"{type(self).__name__}([{kinds}], longest={self.longest})"


class _MixCursor(Cursor):
    """Choose a dataset, take its next item; a dataset with nothing left is exhausted. The state: draws so far,
    the exhausted datasets, each dataset's state (None once exhausted), the subclass's counters (``fields``) and
    the configuration the state must agree with (``config()``)."""

    fields: tuple[str, ...] = ()

    def __init__(self, source: _MixSource, ctx: Context):
        self.source, self.ctx, self.name = source, ctx, source.name
        self.subs = SubCursors(source, ctx)
        self.draws, self.exhausted, self.done = 0, [False] * len(source.datasets), False
        self._config = self.config()

    @property
    def restorable(self) -> bool:  # type: ignore[override]
        return self.subs.restorable

    def _choose(self) -> int | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _changed(self) -> None:
        """The exhausted datasets changed: update ``done`` (and what the choice depends on)."""
        self.done = all(self.exhausted) if self.source.longest else any(self.exhausted)

    def __next__(self) -> Any:
        subs = self.subs.open()
        while not self.done:
            i = self._choose()
            if i is None:
                break
            try:
                return next(subs[i])
            except StopIteration:
                self.exhausted[i] = True
                self._changed()
        raise StopIteration

    def config(self) -> dict[str, Any]:
        """What a saved state must agree with."""
        return {"longest": self.source.longest}

    def mark(self) -> Any:
        exhausted = tuple(self.exhausted)
        counters = tuple(getattr(self, f) for f in self.fields)
        return self.draws, exhausted, counters, self.subs.marks(skip={i for i, x in enumerate(exhausted) if x})

    def state_at(self, mark: Any) -> dict[str, Any]:
        draws, exhausted, counters, marks = mark
        sources = self.subs.states(marks)
        return {"draws": draws, "exhausted": [i for i, x in enumerate(exhausted) if x],
                **dict(zip(self.fields, counters, strict=True)), **self._config, "sources": sources}

    def state_dict(self) -> dict[str, Any]:
        return self.state_at(self.mark())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        name = self.name
        state = require(state, ("draws", "exhausted", "sources", *self.fields, *self._config), name)
        subs = self.subs.open()
        saved = saved_list(state, "sources", len(subs), name)
        for key, value in self._config.items():
            if state[key] != value:
                raise StateError(f"cannot restore {name}: saved state has {key}={shown(state[key])}, this "
                                 f"{name} has {key}={value!r}")
        exhausted = set(ints(state, "exhausted", hi=len(subs) - 1, what=name))
        draws = field(state, "draws", int, lo=0, hi=MAX_COUNT, what=name)
        counters = {key: field(state, key, int, lo=0, hi=len(subs) - 1, what=name) for key in self.fields}
        for i, sub_state in enumerate(saved):
            if i not in exhausted and sub_state is None:
                raise refuse(name, f"sources/{i}", f"is None, but dataset {i} is not exhausted")
        self.subs.restore(saved, skip=exhausted)
        self.draws, self.exhausted = draws, [i in exhausted for i in range(len(subs))]
        for key, value in counters.items():
            setattr(self, key, value)
        self._changed()


class _RandomCursor(_MixCursor):
    """Draw ``k`` is the ``k % BLOCK``-th number of ``ctx.rng("mix", k // BLOCK)``: restoring replays < BLOCK draws."""

    source: RandomMixSource

    def __init__(self, source: RandomMixSource, ctx: Context):
        super().__init__(source, ctx)
        self._rng: Any = None
        self._block = self._at = 0
        self._changed()

    def _changed(self) -> None:
        super()._changed()
        probs = self.source.probs
        self._active = [i for i, (p, x) in enumerate(zip(probs, self.exhausted, strict=True)) if p > 0 and not x]
        self._cumulative = list(itertools.accumulate(probs[i] for i in self._active))

    def _choose(self) -> int | None:
        if not self._active:  # longest: only datasets of weight 0 are left
            return None
        block, k = divmod(self.draws, BLOCK)
        if self._rng is None or self._block != block or self._at > k:
            self._rng, self._block, self._at = self.ctx.rng("mix", block), block, 0
        rng = self._rng
        while self._at < k:
            rng.random()
            self._at += 1
        r = rng.random()
        self._at += 1
        self.draws += 1
        cumulative = self._cumulative
        j = bisect.bisect_right(cumulative, r * cumulative[-1])
        return self._active[min(j, len(cumulative) - 1)]

    def config(self) -> dict[str, Any]:
        return {**super().config(), "probs": list(self.source.probs)}


class _RoundRobinCursor(_MixCursor):
    """The next dataset in turn that is not exhausted (``next`` in the state)."""

    fields = ("next",)

    def __init__(self, source: RoundRobinSource, ctx: Context):
        super().__init__(source, ctx)
        self.next = 0

    def _choose(self) -> int:
        i, count = self.next, len(self.exhausted)
        while self.exhausted[i]:
            i = (i + 1) % count
        self.next, self.draws = (i + 1) % count, self.draws + 1
        return i


class RandomMixSource(_MixSource):
    """The source of :class:`RandomMix` (its name appears in the state's list of stages)."""

    name = "RandomMix"

    def __init__(self, datasets: Any, probs: Sequence[float] | None = None, longest: bool = False):
        super().__init__(datasets, longest)
        self.probs = _weights(probs, len(self.datasets))

    def cursor(self, ctx: Context | None) -> Cursor:
        return _RandomCursor(self, ctx if ctx is not None else Context.current(seed=self.seed))

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, probs={[round(p, 4) for p in self.probs]})"


class RoundRobinSource(_MixSource):
    """The source of :class:`RoundRobin` (its name appears in the state's list of stages)."""

    name = "RoundRobin"

    def cursor(self, ctx: Context | None) -> Cursor:
        return _RoundRobinCursor(self, ctx if ctx is not None else Context.current(seed=self.seed))


class RandomMix(DataPipeline):
    """Items of ``datasets`` drawn at random with probabilities ``probs`` (see the module docstring).

    :param datasets: the datasets to mix (WebDatasets, pipelines, TrainingDatasets, lists: any iterables)
    :param probs: one weight per dataset, >= 0 with a positive sum, normalised (default: equal weights)
    :param longest: False: end the first time a drawn dataset is exhausted; True: go on with the others
    :param seed: the draws (and any random stage added to the mix) are a function of (seed, epoch, rank, worker)

    >>> mix = RandomMix([range(100), range(1000, 1100)], probs=[0.9, 0.1], longest=True, seed=3)
    >>> items = list(mix)
    >>> len(items), sum(x < 100 for x in items[:50]) > 35  # mostly the first dataset, while it lasts
    (200, True)
    >>> batches = RandomMix([range(10), range(10, 20)], seed=1).batched(4)  # fluid methods, as any pipeline
    >>> [b.shape for b in batches][:2]
    [(4,), (4,)]
    """

    def __init__(self, datasets: Iterable[Any], probs: Sequence[float] | None = None, longest: bool = False,
                 seed: int | str | None = None):
        super().__init__(RandomMixSource(datasets, probs, longest), seed=seed)

    @property
    def datasets(self) -> list[Any]:
        """The mixed datasets."""
        return self.pipeline[0].datasets

    @property
    def probs(self) -> list[float]:
        """The normalised probabilities."""
        return list(self.pipeline[0].probs)

    @property
    def longest(self) -> bool:
        return self.pipeline[0].longest


class RoundRobin(DataPipeline):
    """One item of each of ``datasets`` in turn (see the module docstring); ``longest=True`` goes on with the
    others when one is exhausted.

    >>> list(RoundRobin([["a", "b"], ["x"], ["1", "2", "3"]], longest=True))
    ['a', 'x', '1', 'b', '2', '3']
    """

    def __init__(self, datasets: Iterable[Any], longest: bool = False):
        super().__init__(RoundRobinSource(datasets, longest))

    @property
    def datasets(self) -> list[Any]:
        """The datasets, in turn order."""
        return self.pipeline[0].datasets

    @property
    def longest(self) -> bool:
        return self.pipeline[0].longest
