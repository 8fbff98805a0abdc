"""The exact mixing schedule: which source each position of an epoch takes from, with exact counts per source.

An epoch of a mix with per-source counts ``n_0 .. n_{S-1}`` (``N`` in all) is a sequence of ``N`` source numbers
in which source ``i`` appears exactly ``n_i`` times. The ``j``-th appearance of source ``i`` is placed at the
time ``(j + u_i) / n_i``; the sequence is all appearances sorted by time (ties: the lower source first). The
phases ``u_i`` in ``[0, 1)`` are drawn from ``(seed, epoch)``, so each epoch has another order, every rank and
worker computes the same one, and the sources are spread evenly: any window of ``w`` positions holds
``w * n_i / N`` appearances of source ``i``, give or take one.

The schedule is split between ``parts`` (ranks x workers): part ``p`` takes positions ``p, p + parts, ...``
below ``N - N % parts``, so every part gets exactly ``N // parts`` positions (the last ``N % parts`` positions of
the epoch are left out; choose an epoch size divisible by ranks x workers to keep every position).

Where a walk stands is the number of appearances of each source so far (``taken``): restoring needs no replay.

>>> s = Schedule([3, 1], seed=0, epoch=0)
>>> order = list(s.walk())
>>> sorted(order), len(order)
([0, 0, 0, 1], 4)
>>> parts = [list(Schedule([4, 2, 2], seed=1, epoch=0).walk(part=p, parts=2)) for p in range(2)]
>>> [len(p) for p in parts], sorted(parts[0] + parts[1])
([4, 4], [0, 0, 0, 0, 1, 1, 2, 2])
>>> walk = s.walk(); first = next(walk); state = walk.state(); rest = list(walk)
>>> list(s.walk(state=state)) == rest
True
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = ["Schedule", "Walk"]


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
        material = repr(("exact-mix", seed, epoch)).encode()
        rng = random.Random(int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "little"))
        self.phases = [rng.random() for _ in counts]

    @property
    def total(self) -> int:
        """Positions in the epoch."""
        return sum(self.counts)

    def time(self, source: int, j: int) -> float:
        """When the ``j``-th appearance of ``source`` falls (in ``[0, 1)``)."""
        return (j + self.phases[source]) / self.counts[source]

    def walk(self, part: int = 0, parts: int = 1, state: Any = None) -> Walk:
        """The positions of part ``part`` of ``parts``, as source numbers; from the start, or from ``state``."""
        return Walk(self, part, parts, state)


class Walk:
    """An iterator over one part's positions of a :class:`Schedule`; ``state()`` says where it stands."""

    def __init__(self, schedule: Schedule, part: int, parts: int, state: Any = None):
        if parts < 1 or not 0 <= part < parts:
            raise ConfigError(f"part {part} of {parts} parts does not exist")
        self.schedule, self.part, self.parts = schedule, part, parts
        self.length = schedule.total - schedule.total % parts  # positions every part shares out
        self.position, self.taken = 0, [0] * len(schedule.counts)
        if state is not None:
            self.position, self.taken = int(state["position"]), [int(t) for t in state["taken"]]
            if len(self.taken) != len(schedule.counts) or sum(self.taken) != self.position or any(
                    t > c for t, c in zip(self.taken, schedule.counts)):
                raise ConfigError(f"cannot restore a mixing schedule walk from {state!r}: it does not fit the "
                                  f"counts {schedule.counts}")
        self._heap = [(schedule.time(i, t), i) for i, (t, c) in enumerate(zip(self.taken, schedule.counts)) if t < c]
        heapq.heapify(self._heap)

    def __iter__(self) -> Walk:
        return self

    def _step(self) -> int:
        _, i = heapq.heappop(self._heap)
        self.taken[i] += 1
        self.position += 1
        if self.taken[i] < self.schedule.counts[i]:
            heapq.heappush(self._heap, (self.schedule.time(i, self.taken[i]), i))
        return i

    def __next__(self) -> int:
        while self.position < self.length:
            mine = self.position % self.parts == self.part
            i = self._step()
            if mine:
                return i
        raise StopIteration

    @property
    def remaining(self) -> int:
        """Positions of this part not yet walked."""
        left = self.length - self.position
        return max(0, -(-(left - ((self.part - self.position) % self.parts)) // self.parts)) if left > 0 else 0

    def state(self) -> dict[str, Any]:
        """Where the walk stands: the global position and the appearances of each source so far."""
        return {"position": self.position, "taken": list(self.taken)}
