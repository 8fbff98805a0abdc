"""Splitting between ranks and workers: exact, and loud when someone would get nothing."""

from __future__ import annotations

import pytest

from shardstream.errors import ConfigError, WorkerSplitError
from shardstream.pipeline import (
    Context,
    DataPipeline,
    Placement,
    SimpleShardList,
    shuffle,
    single_node_only,
    split_by_node,
    split_by_worker,
)
from shardstream import runtime as placement_module
from shardstream.config import Settings


def ctx(rank=0, world=1, worker=0, workers=1):
    return Context(placement=Placement(rank, world, worker, workers))


def test_every_item_goes_to_exactly_one_rank_and_worker():
    seen = []
    for rank in range(3):
        for worker in range(2):
            c = ctx(rank, 3, worker, 2)
            seen += list(split_by_worker(split_by_node(range(50), c), c))
    assert sorted(seen) == list(range(50))


def test_a_worker_without_shards_raises_and_names_the_fixes():
    with pytest.raises(WorkerSplitError) as info:
        list(split_by_worker(range(3), ctx(worker=3, workers=4)))
    message = str(info.value)
    assert "worker 3 of 4" in message and "3 shards for 4 workers" in message
    assert "num_workers=3" in message and "more shards" in message and "resampled=True" in message


def test_a_rank_without_shards_raises():
    with pytest.raises(WorkerSplitError, match=r"rank 2 of 3 received no shard: there are only 2 shards"):
        list(split_by_node(range(2), ctx(rank=2, world=3)))


def test_single_rank_and_worker_pass_everything():
    assert list(split_by_worker(split_by_node(range(3), ctx()), ctx())) == [0, 1, 2]


def test_single_node_only_refuses_many_ranks():
    assert list(single_node_only(range(2), ctx())) == [0, 1]
    with pytest.raises(ConfigError, match="split_by_node"):
        list(single_node_only(range(2), ctx(world=2)))


def test_rank_comes_from_the_settings_when_torch_distributed_is_not_initialised(monkeypatch):
    monkeypatch.setattr(placement_module, "get_settings", lambda: Settings(rank=1, world_size=2))
    assert placement_module.distributed_rank() == (1, 2)
    assert list(DataPipeline(range(6), split_by_node)) == [1, 3, 5]
    monkeypatch.setattr(placement_module, "get_settings", lambda: Settings(rank=2, world_size=2))
    with pytest.raises(ConfigError, match="RANK"):
        placement_module.distributed_rank()


def test_shard_shuffle_before_the_node_split_is_the_same_on_every_rank(monkeypatch):
    shards = [f"s-{i:02d}.tar" for i in range(20)]
    pipeline = DataPipeline(SimpleShardList(shards), shuffle(100, initial=100), split_by_node)
    for epoch in range(2):
        seen = []
        for rank in range(4):
            monkeypatch.setattr(placement_module, "get_settings", lambda rank=rank: Settings(rank=rank, world_size=4))
            pipeline.set_epoch(epoch)
            seen += [x["url"] for x in pipeline]
        assert sorted(seen) == shards


def test_rank_comes_from_torch_distributed_when_it_is_initialised(monkeypatch):
    class FakeDistributed:
        is_available = staticmethod(lambda: True)
        is_initialized = staticmethod(lambda: True)
        get_rank = staticmethod(lambda: 2)
        get_world_size = staticmethod(lambda: 3)

    monkeypatch.setitem(__import__("sys").modules, "torch.distributed", FakeDistributed)
    monkeypatch.setattr(placement_module, "get_settings", lambda: Settings(rank=0, world_size=1))
    assert placement_module.distributed_rank() == (2, 3)
    assert list(DataPipeline(range(7), split_by_node)) == [2, 5]
