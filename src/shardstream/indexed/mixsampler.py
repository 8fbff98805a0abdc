"""``ExactMixSampler``: the exact mix in indexed mode (random access), for ``DataLoader(ConcatDataset, sampler=)``.

The sources are map-style datasets laid end to end (``torch.utils.data.ConcatDataset`` order: source ``i``'s
sample ``j`` is position ``sum(sizes[:i]) + j``). Each epoch the sampler yields exactly ``counts[i]`` positions
of source ``i`` (all ranks together), in the order of :class:`~shardstream.pipeline.schedule.Schedule` (even
spread, order from ``(seed, epoch)``; each rank its own share, all ranks the same number of positions). Which
sample of a source comes next is a uniform permutation of the source per pass, drawn from
``(seed, epoch, source, pass)``: a count below the size takes a random subset, above it every sample before any
repeats. ``state_dict()`` (the epoch and what each source gave so far) resumes mid-epoch exactly.

>>> sampler = ExactMixSampler(sizes=[100, 10], counts=[30, 10], seed=0)
>>> order = list(sampler)
>>> sum(p < 100 for p in order), sum(p >= 100 for p in order), len(set(order))
(30, 10, 40)
>>> sampler.set_epoch(0); it = iter(sampler); head = [next(it) for _ in range(7)]; state = sampler.state_dict()
>>> again = ExactMixSampler(sizes=[100, 10], counts=[30, 10], seed=0); again.load_state_dict(state)
>>> list(again) == list(it)
True
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, StateError
from ..pipeline.schedule import Schedule
from ..resume.fields import MAX_COUNT, field, mapping, shown
from ..runtime import derive_key, replica

__all__ = ["ExactMixSampler", "MixOrder"]


def _permutation(seed: Any, epoch: int, source: int, passes: int, size: int) -> np.ndarray:
    return np.random.default_rng(derive_key("exact-mix-sampler", seed, epoch, source, passes)).permutation(size)


class MixOrder:
    """The whole epoch of an exact mix as sample ids (positions in the sources laid end to end), by position: for
    plans that split positions between ranks themselves (a training plan). Position ``k`` is source
    ``Schedule(counts, seed, epoch).sequence()[k]``; its draws go through per-pass permutations of the source.

    >>> order = MixOrder(sizes=[4, 2], counts=[4, 4], seed=0, epoch=0)
    >>> ids = order.all().tolist()
    >>> order.total, sorted(i for i in ids if i < 4), sorted(i for i in ids if i >= 4)
    (8, [0, 1, 2, 3], [4, 4, 5, 5])
    >>> order.ids([0, 1]).tolist() == ids[:2]
    True
    """

    def __init__(self, sizes: Sequence[int], counts: Sequence[int], seed: Any = 0, epoch: int = 0):
        self.sizes, self.counts, self.seed, self.epoch = [int(n) for n in sizes], [int(c) for c in counts], seed, epoch
        if len(self.sizes) != len(self.counts) or any(n <= 0 for n, c in zip(self.sizes, self.counts, strict=False) if c):
            raise ConfigError(f"MixOrder: one count per source, and a source with a count needs samples "
                              f"(sizes {self.sizes}, counts {self.counts})")
        self._all: np.ndarray | None = None

    @property
    def total(self) -> int:
        return sum(self.counts)

    def all(self) -> np.ndarray:
        """Every position's sample id."""
        if self._all is None:
            sequence = Schedule(self.counts, self.seed, self.epoch).sequence()
            ids = np.empty(len(sequence), dtype=np.int64)
            offset = 0
            for i, (size, count) in enumerate(zip(self.sizes, self.counts, strict=False)):
                draws = []
                for passes in range(-(-count // size) if count else 0):
                    draws.append(_permutation(self.seed, self.epoch, i, passes, size))
                if draws:
                    ids[sequence == i] = offset + np.concatenate(draws)[:count]
                offset += size
            self._all = ids
        return self._all

    def ids(self, positions: Any) -> np.ndarray:
        """The sample ids at ``positions``."""
        return self.all()[np.asarray(positions, dtype=np.int64)]


class ExactMixSampler:
    """Positions of an exact mix of map-style sources (see the module docstring).

    :param sizes: each source's number of samples (or the datasets themselves: ``len()`` is taken)
    :param counts: samples of each source per epoch, all ranks together
    :param num_replicas, rank: this rank's share (default: from ``torch.distributed`` / ``RANK``, ``WORLD_SIZE``)
    :param seed: with the epoch, determines every order
    """

    def __init__(self, sizes: Sequence[Any], counts: Sequence[int], *, num_replicas: int | None = None,
                 rank: int | None = None, seed: int = 0):
        self.sizes = [s if isinstance(s, int) else len(s) for s in sizes]
        if len(counts) != len(self.sizes) or any(n <= 0 for n, c in zip(self.sizes, counts, strict=False) if c):
            raise ConfigError(f"ExactMixSampler: one count per source, and a source with a count needs samples "
                              f"(sizes {self.sizes}, counts {list(counts)})")
        num_replicas, rank = replica(num_replicas, rank)
        self.counts, self.seed, self.rank, self.num_replicas = [int(c) for c in counts], seed, rank, num_replicas
        self.offsets = [int(x) for x in np.cumsum([0, *self.sizes[:-1]])]
        self.epoch: int = 0
        self._resume: dict[str, Any] | None = None
        self._walk: Any = None

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch (as with ``DistributedSampler``)."""
        self.epoch, self._resume = int(epoch), None

    def __len__(self) -> int:
        return Schedule(self.counts).walk(self.rank, self.num_replicas).remaining

    def _permutation(self, source: int, passes: int) -> np.ndarray:
        return _permutation(self.seed, self.epoch, source, passes, self.sizes[source])

    def __iter__(self) -> Iterator[int]:
        walk = Schedule(self.counts, self.seed, self.epoch).walk(self.rank, self.num_replicas, state=self._resume)
        self._walk, self._resume = walk, None
        cache: dict[int, tuple[int, np.ndarray]] = {}
        while True:
            try:
                i = next(walk)
            except StopIteration:
                return
            draw = (walk.taken[i] - 1) * self.num_replicas + self.rank  # distinct across ranks
            passes, j = divmod(draw, self.sizes[i])
            if cache.get(i, (None,))[0] != passes:
                cache[i] = (passes, self._permutation(i, passes))
            yield self.offsets[i] + int(cache[i][1][j])

    def state_dict(self) -> dict[str, Any]:
        """The epoch and what each source gave this rank so far."""
        taken = self._walk.state()["taken"] if self._walk is not None else [0] * len(self.counts)
        return {"epoch": self.epoch, "taken": taken, "counts": list(self.counts)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume: the next ``iter()`` continues where ``state`` was saved (checked now: a state of other counts,
        or a damaged one, raises :class:`~shardstream.errors.StateError` naming the field)."""
        what = "ExactMixSampler"
        state = mapping(state, what, ("epoch", "taken", "counts"))
        saved = state["counts"]
        if not isinstance(saved, (list, tuple)) or list(saved) != self.counts:
            raise StateError(f"cannot restore {what}: saved counts {shown(saved)}, these {self.counts}")
        epoch = field(state, "epoch", int, lo=0, hi=MAX_COUNT, what=what)
        walk = Schedule(self.counts).walk(self.rank, self.num_replicas, state=state)  # checks 'taken'
        self.epoch, self._resume = epoch, {"taken": list(walk.taken)}
