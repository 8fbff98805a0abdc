"""Samplers for :class:`~shardstream.indexed.IndexedDataset`: shuffled orders that read a few shards at a time.

:class:`LocalitySampler` gives every sample once per epoch in a random order, but reads stay inside a *window*
of ``window`` shards at a time: it shuffles the order of the shards, cuts that order into windows of ``window``
shards, and shuffles the samples inside each window. The page cache (or a shard cache) then holds the few shards
being read, instead of every shard being touched all the time; larger windows mix more. The order is
:class:`shardstream.order.SampleOrder`'s ``"window"`` order, a pure function of ``(seed, epoch)`` and the shard
lengths: the same as ``TrainingDataset(shuffle="window")`` for the same seed, epoch and window. Call
:meth:`~LocalitySampler.set_epoch` at each epoch, as with ``torch.utils.data.DistributedSampler``.

:class:`DistributedLocalitySampler` cuts that same global order (equal on every rank) into ``num_replicas``
contiguous blocks of **equal length**, one per rank: each rank reads its own windows of shards. When the sample
count does not divide, ``drop_last=False`` (default) pads the order by repeating its first samples, so a few
samples are seen twice per epoch; ``drop_last=True`` drops the last samples of the order (different ones each
epoch), so a few are not seen in that epoch (the rule of :mod:`shardstream.order.padding`).

Both take the dataset (its :attr:`~shardstream.indexed.IndexedDataset.shard_lengths`) or a list of shard
lengths, and yield positions in the dataset: use them as ``DataLoader(ds, sampler=...)``.

>>> sampler = LocalitySampler([3, 3, 2], window=1, seed=0)  # three shards: 3, 3 and 2 samples
>>> order = list(sampler)
>>> sorted(order) == list(range(8)), len(sampler)
(True, 8)
>>> shard = [0, 0, 0, 1, 1, 1, 2, 2]  # the shard of each position
>>> sum(shard[a] != shard[b] for a, b in zip(order, order[1:]))  # one shard after the other
2
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ConfigError, WorkerSplitError
from ..order import SampleOrder
from ..order.padding import even_count, pad_or_drop
from ..runtime import replica

__all__ = ["DistributedLocalitySampler", "LocalitySampler"]


def _lengths(data: Any) -> list[int]:
    lengths = getattr(data, "shard_lengths", data)
    try:
        lengths = [int(n) for n in lengths]
    except TypeError:
        raise ConfigError(f"a sampler needs an IndexedDataset or a list of shard lengths, not {data!r}") from None
    if any(n < 0 for n in lengths):
        raise ConfigError(f"shard lengths must be >= 0, got {lengths}")
    return lengths


class LocalitySampler:
    """Every position once per epoch, shuffled within windows of ``window`` shards (see the module docstring).

    :param data: an :class:`~shardstream.indexed.IndexedDataset` (or a view of one), or a list of shard lengths
    :param window: how many shards are read at a time (``1``: one shard at a time; more mixes more)
    :param shuffle: False gives positions in order (``0, 1, 2, ...``; for evaluation)
    :param seed: with the epoch, determines the order

    >>> s = LocalitySampler([4, 4, 4, 4], window=2, seed=7)
    >>> s.set_epoch(1); first = list(s); s.set_epoch(1)
    >>> first == list(s), sorted(first) == list(range(16))
    (True, True)
    """

    def __init__(self, data: Any, *, window: int = 8, shuffle: bool = True, seed: int = 0):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"window must be a number of shards >= 1, got {window!r}")
        self.lengths = _lengths(data)
        self.window, self.shuffle, self.seed = window, bool(shuffle), int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next ``iter()`` gives."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return sum(self.lengths)

    def order(self, epoch: int | None = None) -> np.ndarray:
        """The positions of one epoch (default: the current one), as an int64 array.

        >>> LocalitySampler([3, 3], window=1, seed=0).order(0).tolist() == SampleOrder(
        ...     (3, 3), seed=0, epoch=0, shuffle="window", window=1).all().tolist()
        True
        """
        epoch = self.epoch if epoch is None else int(epoch)
        shuffle = "window" if self.shuffle else "none"
        return SampleOrder(tuple(self.lengths), self.seed, epoch, shuffle, self.window).all()

    def __iter__(self) -> Iterator[int]:
        return iter(self.order().tolist())


class DistributedLocalitySampler(LocalitySampler):
    """This rank's equal share of a :class:`LocalitySampler` order (see the module docstring).

    ``num_replicas`` and ``rank`` default to ``torch.distributed`` when it is initialised, else to the
    ``WORLD_SIZE`` and ``RANK`` settings, else to one rank. ``drop_last`` drops the tail of the order instead of
    padding it by repetition.

    >>> shares = [list(DistributedLocalitySampler([5, 5], num_replicas=3, rank=r)) for r in range(3)]
    >>> [len(share) for share in shares], sorted(set(sum(shares, []))) == list(range(10))
    ([4, 4, 4], True)
    """

    def __init__(self, data: Any, num_replicas: int | None = None, rank: int | None = None, *, window: int = 8,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):  # fmt: skip
        super().__init__(data, window=window, shuffle=shuffle, seed=seed)
        num_replicas, rank = replica(num_replicas, rank)
        self.num_replicas, self.rank, self.drop_last = num_replicas, rank, bool(drop_last)
        total = sum(self.lengths)
        self.per_rank = even_count(total, num_replicas, drop_last=self.drop_last) // num_replicas
        if self.per_rank == 0 and total:
            raise WorkerSplitError(
                f"{total} samples cannot give each of {num_replicas} ranks one with drop_last=True; "
                "use drop_last=False (pads by repetition) or fewer ranks"
            )

    def __len__(self) -> int:
        return self.per_rank

    def order(self, epoch: int | None = None) -> np.ndarray:
        whole = pad_or_drop(super().order(epoch), self.num_replicas, drop_last=self.drop_last)
        return whole[self.rank * self.per_rank : (self.rank + 1) * self.per_rank]

