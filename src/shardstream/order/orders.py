"""The order of one epoch: which sample comes at each position, as a pure function of ``(seed, epoch)``.

Samples are numbered ``0 .. total-1`` shard after shard (``lengths`` gives the samples of each shard).

:class:`SampleOrder` is for random access (indexed shards):

- ``"global"``: a uniform permutation of all samples (:class:`~shardstream.order.Permutation`);
- ``"window"``: the shards in a random order, cut into windows of ``window`` shards; the samples of each window
  are permuted among themselves, so only ``window`` shards are read at a time;
- ``"none"``: ``0, 1, 2, ...`` (evaluation).

:class:`StreamOrder` is for shards read front to back (no index): the shards in a random order are taken
``window`` at a time and their samples interleaved at random (each group of ``window`` shards is read
concurrently, ``window`` streams open), and that *virtual* sequence is shuffled in consecutive blocks of
``buffer`` samples (a block is read, then served in a permuted order).

Nothing here depends on the number of ranks or workers: that is :mod:`~shardstream.training.plan`'s business (and
the samplers' of :mod:`shardstream.indexed`).

>>> order = SampleOrder((4, 4, 4), seed=0, epoch=0, shuffle="window", window=1)
>>> ids = order.ids(range(12)).tolist()
>>> sorted(ids) == list(range(12)), [len({i // 4 for i in ids[w:w + 4]}) for w in (0, 4, 8)]
(True, [1, 1, 1])
>>> s = StreamOrder((5, 5), seed=0, epoch=0, window=2, buffer=4)
>>> sorted(sample for m in range(s.num_blocks) for sample in s.block_samples(m)) == list(range(10))
True
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import numpy as np

from ..errors import ConfigError
from ..runtime import derive_key
from .permute import Permutation

__all__ = ["SHUFFLES", "SampleOrder", "StreamOrder"]

#: every epoch shuffle there is: ``"global"``, ``"window"`` and ``"none"`` are :class:`SampleOrder`'s (random
#: access), ``"stream"`` is :class:`StreamOrder`'s (shards read front to back)
SHUFFLES = ("global", "window", "stream", "none")


def _positions(positions: Iterable[int] | np.ndarray) -> np.ndarray:
    return np.atleast_1d(np.asarray(positions if isinstance(positions, np.ndarray) else list(positions), np.int64))


@dataclasses.dataclass(frozen=True)
class SampleOrder:
    """Position -> sample number for one epoch of indexed reading (see the module docstring).

    >>> SampleOrder((3, 3), seed=0, epoch=0, shuffle="none").ids([0, 5]).tolist()
    [0, 5]
    >>> a = SampleOrder((50, 50), seed=1, epoch=0).ids(range(100))
    >>> b = SampleOrder((50, 50), seed=1, epoch=1).ids(range(100))
    >>> sorted(a.tolist()) == sorted(b.tolist()) == list(range(100)), a.tolist() != b.tolist()
    (True, True)
    """

    lengths: tuple[int, ...]
    seed: int | str = 0
    epoch: int = 0
    shuffle: str = "global"
    window: int = 8

    def __post_init__(self) -> None:
        if self.shuffle not in SHUFFLES or self.shuffle == "stream":
            indexed = tuple(s for s in SHUFFLES if s != "stream")
            raise ConfigError(f"shuffle must be one of {indexed} for random access (\"stream\" is StreamOrder's), "
                              f"not {self.shuffle!r}")
        if self.window < 1:
            raise ConfigError(f"window must be a number of shards >= 1, got {self.window!r}")

    @functools.cached_property
    def total(self) -> int:
        return int(sum(self.lengths))

    @functools.cached_property
    def _global(self) -> Permutation:
        return Permutation(self.total, derive_key("global", self.seed, self.epoch))

    @functools.cached_property
    def _windows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Four arrays, whatever the number of shards: window starts (positions), the shards in their random
        order, the running sample count of that order, and the first sample of each shard (by number)."""
        rng = np.random.default_rng(derive_key("window-shards", self.seed, self.epoch) & (2**63 - 1))
        lengths = np.asarray(self.lengths, dtype=np.int64)
        first = np.concatenate([[0], np.cumsum(lengths)])
        shards = rng.permutation(len(lengths))
        ends = np.concatenate([[0], np.cumsum(lengths[shards])])
        return ends[: len(shards) : self.window], shards, ends, first

    def _window_shards(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """Window ``w``: the first sample of each of its shards, and the shard ends counted from its start."""
        _, shards, ends, first = self._windows
        lo, hi = w * self.window, min((w + 1) * self.window, len(shards))
        return first[shards[lo:hi]], ends[lo + 1 : hi + 1] - ends[lo]

    def ids(self, positions: Iterable[int] | np.ndarray) -> np.ndarray:
        """The sample numbers at ``positions`` (each in ``range(total)``), as an int64 array."""
        where = _positions(positions)
        if self.shuffle == "none" or where.size == 0:
            return where.copy()
        if self.shuffle == "global":
            return self._global(where)
        starts = self._windows[0]
        window_of = np.searchsorted(starts, where, side="right") - 1
        if window_of[0] == window_of[-1] and (window_of == window_of[0]).all():  # a batch inside one window
            return self._in_window(int(window_of[0]), where)
        out = np.empty_like(where)
        for w in np.unique(window_of).tolist():
            mask = window_of == w
            out[mask] = self._in_window(w, where[mask])
        return out

    def all(self) -> np.ndarray:
        """The sample numbers of the whole epoch, position by position (``ids(range(total))``, computed one window
        at a time).

        >>> SampleOrder((2, 2), seed=0, shuffle="window", window=1).all().tolist() in ([0, 1, 2, 3], [1, 0, 2, 3],
        ...     [0, 1, 3, 2], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 0, 1], [2, 3, 1, 0], [3, 2, 1, 0])
        True
        """
        if self.shuffle != "window":
            return self.ids(np.arange(self.total, dtype=np.int64))
        starts = self._windows[0].tolist()
        out = np.empty(self.total, dtype=np.int64)
        for w, (lo, hi) in enumerate(zip(starts, [*starts[1:], self.total], strict=True)):
            if hi > lo:
                out[lo:hi] = self._in_window(w, np.arange(lo, hi, dtype=np.int64))
        return out

    @functools.cached_property
    def _permutations(self) -> dict[int, Permutation]:
        return {}

    def _in_window(self, w: int, where: np.ndarray) -> np.ndarray:
        starts = self._windows[0]
        firsts, ends = self._window_shards(w)
        perm = self._permutations.get(w)
        if perm is None:
            if len(self._permutations) > 4:
                self._permutations.clear()
            perm = self._permutations[w] = Permutation(int(ends[-1]), derive_key("window", self.seed, self.epoch, w))
        inside = perm(where - starts[w])
        shard = np.searchsorted(ends, inside, side="right")
        before = np.where(shard > 0, ends[np.maximum(shard - 1, 0)], 0)
        return firsts[shard] + inside - before


@dataclasses.dataclass(frozen=True)
class StreamOrder:
    """The epoch order of streaming reads (see the module docstring): blocks of ``buffer`` consecutive samples of
    the virtual sequence, each served in a permuted order. ``shuffle=False`` reads the shards in order.

    >>> s = StreamOrder((3, 3), seed=0, epoch=0, shuffle=False, buffer=4)
    >>> [s.block_samples(m).tolist() for m in range(s.num_blocks)], s.block_order(0).tolist()
    ([[0, 1, 2, 3], [4, 5]], [0, 1, 2, 3])
    """

    lengths: tuple[int, ...]
    seed: int | str = 0
    epoch: int = 0
    shuffle: bool = True
    window: int = 8
    buffer: int = 1000

    def __post_init__(self) -> None:
        if self.window < 1 or self.buffer < 1:
            raise ConfigError(f"window and buffer must be >= 1, got window={self.window}, buffer={self.buffer}")

    @functools.cached_property
    def total(self) -> int:
        return int(sum(self.lengths))

    @property
    def num_blocks(self) -> int:
        return -(-self.total // self.buffer)

    @functools.cached_property
    def _lengths(self) -> np.ndarray:
        return np.asarray(self.lengths, dtype=np.int64)

    @functools.cached_property
    def _first(self) -> np.ndarray:
        """The first sample of each shard (by number), and the total at the end."""
        return np.concatenate([[0], np.cumsum(self._lengths)])

    @property
    def _size(self) -> int:
        """Shards per group."""
        return self.window if self.shuffle else 1

    @functools.cached_property
    def _groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Group starts in the virtual sequence, and the shards in reading order (group ``g`` is the ``g``-th run
        of :attr:`_size` of them): two arrays, whatever the number of shards."""
        count = len(self.lengths)
        if self.shuffle:
            rng = np.random.default_rng(derive_key("stream-shards", self.seed, self.epoch) & (2**63 - 1))
            shards = rng.permutation(count)
        else:
            shards = np.arange(count)
        if not count:
            return np.zeros(0, dtype=np.int64), shards
        sizes = np.add.reduceat(self._lengths[shards], np.arange(0, count, self._size))
        return np.concatenate([[0], np.cumsum(sizes)])[:-1], shards

    @functools.cached_property
    def _label_cache(self) -> dict[int, np.ndarray]:
        return {}

    def _labels(self, group: int) -> np.ndarray:
        """For each position of the group, which of its shards it reads (a random interleaving)."""
        cache = self._label_cache
        if group not in cache:
            if len(cache) >= 2:
                cache.pop(next(iter(cache)))
            cache[group] = self._make_labels(group)
        return cache[group]

    def _make_labels(self, group: int) -> np.ndarray:
        members = self.group_shards(group)
        labels = np.repeat(np.arange(len(members), dtype=np.int32), self._lengths[members])
        if self.shuffle and len(members) > 1:
            np.random.default_rng(derive_key("interleave", self.seed, self.epoch, group) & (2**63 - 1)).shuffle(labels)
        return labels

    def runs(self, lo: int, hi: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Virtual positions ``lo .. hi-1`` as reads: ``(shard, first sample in the shard, which shard each
        position reads)`` per group touched, where the last array holds indices into that group's shards."""
        starts = self._groups[0]
        out = []
        g = int(np.searchsorted(starts, lo, side="right") - 1)
        while lo < hi:
            end = int(starts[g + 1]) if g + 1 < len(starts) else self.total
            a, b = lo - int(starts[g]), min(hi, end) - int(starts[g])
            labels = self._labels(g)
            before = np.bincount(labels[:a], minlength=len(self.group_shards(g)))
            out.append((g, before, labels[a:b]))
            lo, g = min(hi, end), g + 1
        return out

    def group_shards(self, group: int) -> np.ndarray:
        """The shards (numbers in ``lengths``) of a group, in the order its labels refer to them."""
        return self._groups[1][group * self._size : (group + 1) * self._size]

    def block_samples(self, block: int) -> np.ndarray:
        """The sample numbers of block ``block`` in virtual order (before the block's permutation)."""
        lo, hi = block * self.buffer, min((block + 1) * self.buffer, self.total)
        first = self._first
        out = []
        for g, before, labels in self.runs(lo, hi):
            shards = self.group_shards(g)
            counts = before.copy()
            for label in labels.tolist():
                out.append(int(first[shards[label]] + counts[label]))
                counts[label] += 1
        return np.asarray(out, dtype=np.int64)

    def block_order(self, block: int) -> np.ndarray:
        """Positions inside block ``block`` in the order they are served (a permutation of its length)."""
        size = min(self.buffer, self.total - block * self.buffer)
        if not self.shuffle:
            return np.arange(size, dtype=np.int64)
        return Permutation(size, derive_key("block", self.seed, self.epoch, block))(np.arange(size))
