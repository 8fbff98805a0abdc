"""The epoch plan: which position of the epoch order each rank serves in each batch, as a pure function.

An :class:`EpochPlan` takes the positions still to be served in this epoch (``origin``: intervals of the epoch
order, the whole order at first), makes their count a multiple of the ranks (``drop_last=False``: the first
positions are served again, at most ``world_size - 1`` of them; ``drop_last=True``: the last ones are left out
so that every batch is full, fewer than ``world_size * batch_size``: the rule of
:mod:`shardstream.order.padding`), and deals them:

- *strided* (indexed reading): rank ``r`` serves positions ``r, r + N, r + 2N, ...``; its batch ``j`` is the
  ``j``-th run of ``batch_size`` of them. The rank's sequence does not depend on the number of workers.
- *contiguous* (streaming reads): rank ``r`` serves one run of consecutive positions, cut into one run per
  DataLoader worker (worker ``w`` holds batches ``w, w + W, ...``), so each worker reads its shards front to back.

Every rank has the same number of samples and batches. Within a rank, batch ``j`` is produced by worker
``j % W``: torch's DataLoader returns worker results round-robin, so a rank sees batches ``0, 1, 2, ...`` in
order. ``skip`` batches are already consumed (a resumed epoch). :meth:`EpochPlan.resume` continues a plan after
``c`` consumed batches: with the same ranks and batch size it only skips; with others (elastic resume) the
positions nobody has consumed become the ``origin`` of a new plan for the new ranks.

>>> plan = EpochPlan(total=10, world_size=2, batch_size=2)
>>> [[plan.positions(r, j).tolist() for j in range(plan.num_batches)] for r in range(2)]
[[[0, 2], [4, 6], [8]], [[1, 3], [5, 7], [9]]]
>>> later = plan.resume(1, world_size=3, batch_size=2)  # each rank consumed one batch; now 3 ranks
>>> later.origin, later.num_batches, sorted(p for r in range(3) for p in later.rank_positions(r).tolist())
(((4, 10),), 1, [4, 5, 6, 7, 8, 9])
"""

from __future__ import annotations

import bisect
import dataclasses
import functools

import numpy as np

from ..errors import ConfigError, StateError
from ..order.padding import even_count, wrapped

__all__ = ["EpochPlan", "Interval"]

Interval = tuple[int, int]


def _merge(intervals: list[Interval]) -> tuple[Interval, ...]:
    out: list[list[int]] = []
    for lo, hi in intervals:
        if hi <= lo:
            continue
        if out and out[-1][1] == lo:
            out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


@dataclasses.dataclass(frozen=True)
class EpochPlan:
    """One epoch's assignment of positions to ranks, workers and batches (see the module docstring).

    :param total: the number of positions in the epoch order (samples in the dataset)
    :param world_size: ranks; :param batch_size: samples per batch; :param drop_last: see the module docstring
    :param num_workers: DataLoader workers per rank (used by the contiguous layout only)
    :param contiguous: the layout for streaming reads
    :param origin: the positions to serve, as ``(lo, hi)`` intervals of the order (default: all of it)
    :param skip: batches of each rank already consumed

    >>> plan = EpochPlan(total=9, batch_size=2, contiguous=True, num_workers=2)  # worker 1 reads from 5 on
    >>> [plan.positions(0, j).tolist() for j in range(plan.num_batches)]
    [[0, 1], [5, 6], [2, 3], [7, 8], [4]]
    >>> EpochPlan(total=7, world_size=2, batch_size=2).rank_positions(1).tolist()  # padded: 0 served twice
    [1, 3, 5, 0]
    >>> EpochPlan(total=7, world_size=2, batch_size=2, drop_last=True).rank_positions(1).tolist()
    [1, 3]
    """

    total: int
    world_size: int = 1
    batch_size: int = 1
    drop_last: bool = False
    num_workers: int = 1
    contiguous: bool = False
    origin: tuple[Interval, ...] | None = None
    skip: int = 0

    def __post_init__(self) -> None:
        if self.world_size < 1 or self.batch_size < 1 or self.num_workers < 1:
            raise ConfigError(f"world_size, batch_size and num_workers must be >= 1, got {self.world_size}, "
                              f"{self.batch_size} and {self.num_workers}")
        if self.origin is None:
            object.__setattr__(self, "origin", ((0, self.total),) if self.total else ())
        object.__setattr__(self, "origin", tuple((int(lo), int(hi)) for lo, hi in self.origin))  # type: ignore[union-attr]
        if any(not 0 <= lo < hi <= self.total for lo, hi in self.origin):  # type: ignore[union-attr]
            raise ConfigError(f"plan origin {self.origin} does not fit an order of {self.total} positions")
        if not 0 <= self.skip <= self.num_batches:
            raise ConfigError(f"cannot skip {self.skip} batches of an epoch of {self.num_batches} batches per rank")

    # -- sizes ------------------------------------------------------------------------------------------------
    @functools.cached_property
    def _starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([hi - lo for lo, hi in self.origin], dtype=np.int64)])  # type: ignore[union-attr]

    @functools.cached_property
    def work(self) -> int:
        """Positions to serve before padding or dropping."""
        return int(self._starts[-1])

    @functools.cached_property
    def length(self) -> int:
        """Positions served by all ranks together (``work`` padded up or cut down)."""
        return even_count(self.work, self.world_size, drop_last=self.drop_last, unit=self.batch_size)

    @property
    def per_rank(self) -> int:
        """Samples each rank serves in the whole plan (skipped batches included)."""
        return self.length // self.world_size

    @property
    def num_batches(self) -> int:
        """Batches of each rank in the whole plan (skipped batches included)."""
        return -(-self.per_rank // self.batch_size)

    @property
    def remaining_batches(self) -> int:
        return self.num_batches - self.skip

    def batch_len(self, j: int) -> int:
        return max(0, min(self.batch_size, self.per_rank - j * self.batch_size))

    # -- positions --------------------------------------------------------------------------------------------
    def _piece_size(self, worker: int) -> int:
        count = len(range(worker, self.num_batches, self.num_workers))
        size = count * self.batch_size
        if count and (self.num_batches - 1) % self.num_workers == worker:
            size -= self.batch_size - self.batch_len(self.num_batches - 1)
        return size

    def _piece_start(self, rank: int, worker: int) -> int:
        """Where worker ``worker``'s run of rank ``rank`` starts: the sizes of the runs of workers ``0..worker-1``,
        added up in closed form (a restore walks every rank's and worker's run)."""
        nb, nw = self.num_batches, self.num_workers
        batches = worker * (nb // nw) + min(worker, nb % nw)  # batches of workers 0..worker-1
        size = batches * self.batch_size
        if nb and (nb - 1) % nw < worker:  # the last, maybe short, batch is among them
            size -= self.batch_size - self.batch_len(nb - 1)
        return rank * self.per_rank + size

    def work_positions(self, rank: int, j: int) -> np.ndarray:
        """Positions in the work sequence (``0 .. length-1``) of rank ``rank``'s batch ``j``."""
        size = self.batch_len(j)
        if self.contiguous:
            start = self._piece_start(rank, j % self.num_workers) + (j // self.num_workers) * self.batch_size
            return np.arange(start, start + size, dtype=np.int64)
        return rank + self.world_size * np.arange(j * self.batch_size, j * self.batch_size + size, dtype=np.int64)

    def to_order(self, work: np.ndarray) -> np.ndarray:
        """Work-sequence positions -> positions of the epoch order (padding wraps to the start)."""
        work = wrapped(work, self.work)
        which = np.searchsorted(self._starts, work, side="right") - 1
        lows = np.asarray([lo for lo, _ in self.origin], dtype=np.int64)  # type: ignore[union-attr]
        return lows[which] + work - self._starts[which]

    def positions(self, rank: int, j: int) -> np.ndarray:
        """Positions of the epoch order in rank ``rank``'s batch ``j``, in serving order."""
        span = self.position_range(rank, j)
        if span is not None:
            return np.arange(span.start, span.stop, span.step, dtype=np.int64)
        return self.to_order(self.work_positions(rank, j))

    def position_range(self, rank: int, j: int) -> range | None:
        """:meth:`positions` as a ``range`` when they are one arithmetic run of the order (no padding, one
        interval of ``origin``: every batch but a few at the ends of intervals); else None.

        >>> list(EpochPlan(total=10, world_size=2, batch_size=2).position_range(1, 1))
        [5, 7]
        >>> EpochPlan(total=7, world_size=2, batch_size=2).position_range(1, 1) is None  # padded: 0 again
        True
        """
        if not 0 <= rank < self.world_size or not 0 <= j < self.num_batches:
            raise IndexError(f"no batch {j} of rank {rank} in a plan of {self.num_batches} batches x "
                             f"{self.world_size} ranks")
        size = self.batch_len(j)
        if self.contiguous:
            start, step = self._piece_start(rank, j % self.num_workers) + (j // self.num_workers) * self.batch_size, 1
        else:
            start, step = rank + self.world_size * j * self.batch_size, self.world_size
        last = start + step * (size - 1)
        starts = self._bounds
        if size < 1 or last >= starts[-1]:
            return None
        i = bisect.bisect_right(starts, start) - 1
        if last >= starts[i + 1]:
            return None
        shift = self.origin[i][0] - starts[i]  # type: ignore[index]
        return range(start + shift, last + shift + 1, step)

    @functools.cached_property
    def _bounds(self) -> list[int]:
        """:attr:`_starts` as a list (the ends of the origin intervals in the work sequence)."""
        return [int(x) for x in self._starts]

    def rank_positions(self, rank: int) -> np.ndarray:
        """Every position rank ``rank`` serves after the skipped batches, in order (for tests and tools)."""
        parts = [self.positions(rank, j) for j in range(self.skip, self.num_batches)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def batches(self, worker: int = 0, num_workers: int = 1) -> range:
        """The batch numbers worker ``worker`` of ``num_workers`` produces, in order."""
        return range(self.skip + worker, self.num_batches, num_workers)

    # -- resuming ---------------------------------------------------------------------------------------------
    def consumed(self, batches: int) -> tuple[Interval, ...]:
        """Work-sequence intervals (below ``work``) served once every rank consumed ``batches`` batches."""
        batches = min(batches, self.num_batches)
        if not self.contiguous:
            return _merge([(0, min(self.work, self.world_size * min(self.per_rank, batches * self.batch_size)))])
        spans = []
        for rank in range(self.world_size):
            for worker in range(self.num_workers):
                done = len(range(worker, batches, self.num_workers))
                size = self._piece_size(worker) if done == len(range(worker, self.num_batches, self.num_workers)) \
                    else done * self.batch_size
                start = self._piece_start(rank, worker)
                spans.append((start, min(start + size, self.work)))
        return _merge(sorted(spans))

    def remaining(self, batches: int) -> tuple[Interval, ...]:
        """Order intervals nobody has served after ``batches`` batches of every rank (in work order)."""
        gaps, at = [], 0
        for lo, hi in self.consumed(batches):
            gaps.append((at, lo))
            at = max(at, hi)
        gaps.append((at, self.work))
        out = []
        for lo, hi in gaps:
            while lo < hi:
                i = int(np.searchsorted(self._starts, lo, side="right") - 1)
                end = min(hi, int(self._starts[i + 1]))
                base = self.origin[i][0] - int(self._starts[i])  # type: ignore[index]
                out.append((base + lo, base + end))
                lo = end
        return _merge(out)

    def resume(self, batches: int, *, world_size: int | None = None, batch_size: int | None = None,
               num_workers: int | None = None) -> EpochPlan:
        """This plan after every rank consumed ``batches`` batches, for the (possibly new) ranks and workers."""
        if not 0 <= batches <= self.num_batches:
            raise StateError(f"a state says {batches} batches were consumed, but this epoch has "
                             f"{self.num_batches} batches per rank")
        n = self.world_size if world_size is None else world_size
        b = self.batch_size if batch_size is None else batch_size
        w = self.num_workers if num_workers is None else num_workers
        if n == self.world_size and b == self.batch_size and (w == self.num_workers or not self.contiguous):
            return dataclasses.replace(self, skip=batches, num_workers=w)
        return dataclasses.replace(self, world_size=n, batch_size=b, num_workers=w, origin=self.remaining(batches),
                                   skip=0)
