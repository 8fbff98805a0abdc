"""The exact mixing schedule: which source each position of an epoch takes from, with exact counts per source.

An epoch of a mix with per-source counts ``n_0 .. n_{S-1}`` (``N`` in all) is a sequence of ``N`` source numbers
in which source ``i`` appears exactly ``n_i`` times. The ``j``-th appearance of source ``i`` is placed at a time
drawn uniformly in ``[j / n_i, (j + 1) / n_i)`` (stratified); the sequence is all appearances sorted by time (ties:
the lower source first). The draws are a hash of ``(seed, epoch, i, j)``: each epoch has another order, every rank
and worker computes the same one without talking, any position's time is computed on its own (nothing is stored
per position), and the sources are spread evenly: any window of ``w`` positions holds ``w * n_i / N``
appearances of source ``i``, give or take two.

Split between ``parts`` (ranks x workers), each part gets its own share of every count and its own schedule
(drawn with the part's number too). The shares: lay the epoch's ``N`` items out source after source and deal
them to the parts in turn; part ``p`` gets source ``i``'s items that fall to it. Every part so gets exactly
``N // parts`` items and each source's count within one of ``n_i / parts``; the parts' shares add up to the
counts. Where ``N`` is not a multiple of ``parts``, the last ``N % parts`` items (the end of the last source) are
left out of the epoch: choose an epoch size divisible by ranks x workers to keep every one.

Where a walk stands is the number of appearances of each source so far (``taken``): restoring needs no replay.

>>> s = Schedule([3, 1], seed=0, epoch=0)
>>> order = list(s.walk())
>>> sorted(order), len(order)
([0, 0, 0, 1], 4)
>>> parts = [list(Schedule([4, 2, 2], seed=1, epoch=0).walk(part=p, parts=2)) for p in range(2)]
>>> [sorted(p) for p in parts]
[[0, 0, 1, 2], [0, 0, 1, 2]]
>>> Schedule([5, 3, 2], seed=1).shares(3)
[[2, 1, 0], [2, 1, 0], [1, 1, 1]]
>>> walk = s.walk(); first = next(walk); state = walk.state(); rest = list(walk)
>>> list(s.walk(state=state)) == rest
True
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from ..resume.fields import ints
from ..runtime import derive_key

__all__ = ["Schedule", "Walk"]

_MASK = (1 << 64) - 1


def _uniform(x: int) -> float:
    """A number in [0, 1) that is a hash of ``x`` (splitmix64's finaliser)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((x ^ (x >> 31)) >> 11) / (1 << 53)


class Schedule:
    """The schedule of one epoch (see the module docstring).

    >>> Schedule([2, 1], seed=3, epoch=0).counts
    [2, 1]
    """

    def __init__(self, counts: Sequence[int], seed: int | str = 0, epoch: int = 0):
        counts = [int(c) for c in counts]
        if not counts or any(c < 0 for c in counts):
            raise ConfigError(f"a mixing schedule needs counts >= 0, one per source, not {counts}")
        self.counts, self.seed, self.epoch = counts, seed, epoch
        self._key = derive_key("exact-mix", seed, epoch)

    @property
    def total(self) -> int:
        """Positions in the epoch."""
        return sum(self.counts)

    def shares(self, parts: int) -> list[list[int]]:
        """Each part's count of each source (see the module docstring)."""
        length = self.total - self.total % parts
        out, start = [[0] * len(self.counts) for _ in range(parts)], 0
        for i, n in enumerate(self.counts):
            end = min(start + n, length)
            for p in range(parts):  # items k in [start, end) with k % parts == p
                first = start + (p - start) % parts
                out[p][i] = 0 if first >= end else (end - 1 - first) // parts + 1
            start += n
        return out

    def time(self, source: int, j: int, part: int = 0) -> float:
        """When the ``j``-th appearance of ``source`` falls in part ``part``'s schedule (in ``[j / n, (j + 1) / n)``,
        ``n`` the part's count of the source)."""
        return (j + _uniform(self._key ^ (part << 52) ^ (source << 36) ^ j))

    def sequence(self) -> Any:
        """The whole epoch at once (one part) as a numpy array of source numbers: what ``walk()`` yields, computed
        with numpy (for random access by position, e.g. a training plan).

        >>> s = Schedule([3, 2, 1], seed=4)
        >>> s.sequence().tolist() == list(s.walk())
        True
        """
        import numpy as np  # noqa: PLC0415 - numpy loads only where arrays are built

        sources = np.repeat(np.arange(len(self.counts), dtype=np.uint64), self.counts)
        starts = np.repeat(np.cumsum([0, *self.counts[:-1]]), self.counts)
        j = np.arange(len(sources), dtype=np.int64) - starts
        x = np.uint64(self._key) ^ (sources << np.uint64(36)) ^ j.astype(np.uint64)
        with np.errstate(over="ignore"):
            x = x + np.uint64(0x9E3779B97F4A7C15)
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        u = ((x ^ (x >> np.uint64(31))) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
        times = (j + u) / np.asarray(self.counts, dtype=np.float64)[sources.astype(np.int64)]
        order = np.lexsort((sources, times))  # by time, ties to the lower source
        return sources[order].astype(np.int64)

    def walk(self, part: int = 0, parts: int = 1, state: Any = None) -> Walk:
        """The sources of part ``part`` of ``parts``, position after position; from the start, or from ``state``."""
        return Walk(self, part, parts, state)


class Walk:
    """An iterator over one part's positions of a :class:`Schedule`; ``state()`` says where it stands."""

    def __init__(self, schedule: Schedule, part: int, parts: int, state: Any = None):
        if parts < 1 or not 0 <= part < parts:
            raise ConfigError(f"part {part} of {parts} parts does not exist")
        self.schedule, self.part, self.parts = schedule, part, parts
        self.counts = schedule.shares(parts)[part]
        self.taken = [0] * len(self.counts)
        if state is not None:  # checked: each count within this part's share of the source
            self.taken = ints(state, "taken", length=len(self.counts), hi=self.counts, what="a mixing schedule walk")
        self._heap = [(self._time(i, t), i) for i, (t, c) in enumerate(zip(self.taken, self.counts, strict=False)) if t < c]
        heapq.heapify(self._heap)

    def _time(self, i: int, j: int) -> float:
        return self.schedule.time(i, j, self.part) / self.counts[i]

    def __iter__(self) -> Walk:
        return self

    def __next__(self) -> int:
        if not self._heap:
            raise StopIteration
        _, i = heapq.heappop(self._heap)
        self.taken[i] += 1
        if self.taken[i] < self.counts[i]:
            heapq.heappush(self._heap, (self._time(i, self.taken[i]), i))
        return i

    @property
    def remaining(self) -> int:
        """Positions of this part not yet walked."""
        return sum(self.counts) - sum(self.taken)

    def state(self) -> dict[str, Any]:
        """Where the walk stands: the appearances of each source so far."""
        return {"taken": list(self.taken)}
