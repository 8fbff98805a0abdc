"""Where a :class:`~shardstream.cluster.ClusterLoader`'s tasks should run: on a Dask worker that has their shards.

A remote shard read through the shard cache (:class:`~shardstream.io.cache.ShardCache`) is downloaded whole by the
first worker that reads it, into *that worker's* cache directory (each machine has its own disk; a relative
directory is relative to each worker's working directory). A task that runs where its shards are cached reads
them without any download, so the loader asks Dask to run it there:

- :func:`task_shards`: the shards a task of a :class:`~shardstream.training.TrainingDataset` reads (every order:
  global, window, none, a mix of sources, and stream, whose blocks read whole groups of shards);
- :class:`Holders`: which worker's cache holds which shard. It lists every worker's cache once per pass (one
  :func:`cached_names` call per worker through ``client.run``, a directory listing: not per task), and learns
  from each result received (the worker that ran a task has its shards cached now);
- the loader submits each task with ``workers=`` the workers holding most of its shards and
  ``allow_other_workers=True``: a busy worker's queue may be taken over by another (Dask's work stealing), and a
  dead worker's tasks run elsewhere, so placement never blocks and never changes a batch (batches depend only on
  the seed, the epoch, the rank and the number of ranks).

A pipeline's shards are chosen inside its slots (its ``split_by_worker``, its shard shuffle), so the trainer cannot
name them ahead: each slot's next task is asked to run where its previous one ran, whose cache holds the shard the
slot is in the middle of.

>>> h = Holders("cache", {"a.tar": 0, "b.tar": 1})
>>> h.ran([0, 1], "tcp://w1:1"); h.ran([1], "tcp://w2:1")
>>> h.best([1]), h.best([0, 1]), h.best([2])
(['tcp://w1:1', 'tcp://w2:1'], ['tcp://w1:1'], None)
"""

from __future__ import annotations

import collections
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ..io.cache import ShardCache
from ..io.urls import local_path
from ..order import StreamOrder
from ..training.plan import EpochPlan

__all__ = ["Holders", "cached_names", "recipe_cache", "task_shards"]


def recipe_cache(dataset: Any) -> Holders | None:
    """An empty :class:`Holders` for a recipe whose Dask workers download its shards into their own shard cache (a ``TrainingDataset`` with ``shuffle="stream"`` and ``cache_dir=``, remote
    shards); None otherwise (local shards are read in place; an indexed ``TrainingDataset`` downloads its
    remote shards where it is made, before any task runs)."""
    cache, urls = getattr(dataset, "_opener", None), getattr(dataset, "_urls", ())
    if not isinstance(cache, ShardCache) or not urls:
        return None
    names = {cache.name_for(url): number for number, url in enumerate(urls) if local_path(url) is None}
    return Holders(cache.directory, names) if names else None


def cached_names(directory: str, names: Collection[str]) -> list[str]:
    """Which of ``names`` the shard cache ``directory`` holds (run on each Dask worker: its own directory)."""
    held = ShardCache(directory).entries()
    return [name for name in names if name in held]


class Holders:
    """Which Dask workers' caches hold which shards (see the module docstring): the caches are ``directory`` on
    each worker, ``names`` maps cache file names to shard numbers."""

    def __init__(self, directory: str, names: dict[str, int]):
        self.directory, self.names = directory, names
        self.shards: dict[int, set[str]] = collections.defaultdict(set)

    def refresh(self, client: Any) -> None:
        """Ask every worker which of the shards its cache holds, now (one call each)."""
        found = client.run(cached_names, self.directory, list(self.names), on_error="return")
        self.shards.clear()
        for worker, names in found.items():
            if isinstance(names, list):  # a worker that failed to answer holds nothing we know of
                for name in names:
                    self.shards[self.names[name]].add(worker)

    def ran(self, shards: Sequence[int] | None, worker: str | None) -> None:
        """A task read ``shards`` on ``worker``: its cache holds them now."""
        if shards is not None and worker is not None:
            for shard in shards:
                self.shards[shard].add(worker)

    def best(self, shards: Sequence[int] | None) -> list[str] | None:
        """The workers holding the most of ``shards`` (sorted), or None when none holds any."""
        counts: collections.Counter[str] = collections.Counter()
        for shard in shards or ():
            counts.update(self.shards.get(shard, ()))
        if not counts:
            return None
        most = max(counts.values())
        return sorted(worker for worker, count in counts.items() if count == most)


def task_shards(dataset: Any, epoch: int, plan: EpochPlan, rank: int, batches: Sequence[int]) -> list[int]:
    """The shards (numbers in ``dataset``'s shard list) that batches ``batches`` of rank ``rank`` read in epoch
    ``epoch``: the shards of their samples (random access), or every shard the blocks holding their positions
    read (streaming: a block reads its groups' shards front to back)."""
    order = dataset.order(epoch)
    positions = np.concatenate([plan.positions(rank, j) for j in batches])
    if isinstance(order, StreamOrder):
        found: set[int] = set()
        for block in np.unique(positions // order.buffer).tolist():
            lo, hi = block * order.buffer, min((block + 1) * order.buffer, order.total)
            for group, _, labels in order.runs(lo, hi):
                found.update(order.group_shards(group)[np.unique(labels)].tolist())
        return sorted(found)
    ends = np.cumsum(np.asarray(dataset.lengths, dtype=np.int64))
    return np.unique(np.searchsorted(ends, order.ids(positions), side="right")).tolist()
