"""Locality-aware samplers: permutations, deterministic from (seed, epoch), windows of shards, equal rank shares."""

from __future__ import annotations

import random

import pytest

from shardstream.errors import ConfigError, WorkerSplitError
from shardstream.indexed import DistributedLocalitySampler, LocalitySampler

LENGTHS = [7, 3, 0, 10, 5, 8, 1, 6]


def shard_of(lengths):
    return [s for s, n in enumerate(lengths) for _ in range(n)]


@pytest.mark.parametrize("window", [1, 2, 3, 100])
def test_each_epoch_is_a_permutation_read_window_by_window(window):
    sampler = LocalitySampler(LENGTHS, window=window, seed=5)
    owner = shard_of(LENGTHS)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        order = list(sampler)
        assert sorted(order) == list(range(sum(LENGTHS))) and len(sampler) == len(order)
        # locality: at any time, at most `window` shards have been started and not finished
        left, started, most = dict(enumerate(LENGTHS)), set(), 0
        for p in order:
            started.add(owner[p])
            left[owner[p]] -= 1
            most = max(most, sum(1 for shard in started if left[shard]))
        assert most <= window

def test_orders_depend_only_on_seed_and_epoch():
    a, b = LocalitySampler(LENGTHS, window=2, seed=1), LocalitySampler(LENGTHS, window=2, seed=1)
    random.seed(123)  # no global random state is used
    first = list(a)
    random.seed(999)
    assert first == list(b) == list(a)
    a.set_epoch(1)
    assert list(a) != first
    assert list(LocalitySampler(LENGTHS, window=2, seed=2)) != first
    assert list(LocalitySampler(LENGTHS, shuffle=False)) == list(range(40))


def test_window_one_reads_one_shard_at_a_time():
    owner = shard_of(LENGTHS)
    order = list(LocalitySampler(LENGTHS, window=1, seed=0))
    changes = sum(owner[a] != owner[b] for a, b in zip(order, order[1:]))
    assert changes == sum(1 for n in LENGTHS if n) - 1


@pytest.mark.parametrize("world", [1, 2, 3, 7, 40, 41])
def test_ranks_get_equal_shares(world):
    total = sum(LENGTHS)
    shares = [list(DistributedLocalitySampler(LENGTHS, world, r, window=2, seed=4)) for r in range(world)]
    per = -(-total // world)
    assert all(len(s) == per for s in shares) and len(DistributedLocalitySampler(LENGTHS, world, 0)) == per
    assert set(sum(shares, [])) == set(range(total))  # padded by repetition: every sample is seen
    if world > total:
        return
    dropped = [list(DistributedLocalitySampler(LENGTHS, world, r, seed=4, drop_last=True)) for r in range(world)]
    assert all(len(s) == total // world for s in dropped)
    flat = sum(dropped, [])
    assert len(set(flat)) == len(flat)  # dropping never repeats
    whole = list(LocalitySampler(LENGTHS, window=2, seed=4))
    assert sum(shares, [])[:total] == whole  # contiguous blocks of the one global order


def test_distributed_defaults_and_errors(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    sampler = DistributedLocalitySampler(LENGTHS)
    assert (sampler.rank, sampler.num_replicas, len(sampler)) == (1, 4, 10)
    with pytest.raises(WorkerSplitError):
        DistributedLocalitySampler([1, 1], 3, 0, drop_last=True)
    with pytest.raises(ConfigError):
        DistributedLocalitySampler(LENGTHS, 2, 2)
    with pytest.raises(ConfigError):
        LocalitySampler(LENGTHS, window=0)
    with pytest.raises(ConfigError):
        LocalitySampler(5)
