"""TrainingDataset(spec): the exact mix by random access, batches per rank, resume (real DataLoader workers)."""

from __future__ import annotations

import collections

import pytest

from shardstream.errors import ConfigError
from shardstream.testing import write_shards
from shardstream.training import TrainingDataset


@pytest.fixture
def spec(tmp_path):
    a = write_shards(tmp_path / "a", [30, 30], {"src": "a"}, key="a{number}")
    b = write_shards(tmp_path / "b", [12], {"src": "b"}, key="b{number}")
    return {"epoch_size": 80, "sources": [{"name": "a", "shards": a, "proportion": 0.75},
                                          {"name": "b", "shards": b, "proportion": 0.25}]}


def keys(batches):
    return [k for batch in batches for k in batch["__key__"]]


def test_epochs_have_the_exact_counts(spec):
    ds = TrainingDataset(spec, batch_size=8, seed=1)
    assert ds.num_samples == 80
    orders = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        got = keys(ds)
        assert collections.Counter(k[0] for k in got) == {"a": 60, "b": 20}
        assert len(set(k for k in got if k[0] == "a")) == 60  # 60 of the 60 a's: each once
        orders.append(got)
    assert orders[0] != orders[1]


def test_ranks_get_equal_batches_and_resume_is_exact(spec):
    shares = [keys(TrainingDataset(spec, batch_size=4, seed=2, rank=r, world_size=2)) for r in range(2)]
    assert len(shares[0]) == len(shares[1]) == 40
    assert collections.Counter(k[0] for s in shares for k in s) == {"a": 60, "b": 20}
    ds = TrainingDataset(spec, batch_size=4, seed=2)
    it = iter(ds)
    head = [next(it) for _ in range(7)]
    state = ds.state_dict()
    rest = keys(it)
    again = TrainingDataset(spec, batch_size=4, seed=2)
    again.load_state_dict(state)
    assert keys(again) == rest and len(keys(head)) + len(rest) == 80


def test_dataloader_workers(spec):
    torch = pytest.importorskip("torch")
    ds = TrainingDataset(spec, batch_size=8, seed=3)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    assert collections.Counter(k[0] for k in keys(loader)) == {"a": 60, "b": 20}


def test_streaming_only_settings_are_refused(spec):
    spec["sources"][0]["fields"] = ["src"]
    with pytest.raises(ConfigError, match="use WebDataset"):
        TrainingDataset(spec, batch_size=4)
    del spec["sources"][0]["fields"]
    with pytest.raises(ConfigError, match="shuffle='global'"):
        TrainingDataset(spec, batch_size=4, shuffle="stream")
