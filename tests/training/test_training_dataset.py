"""TrainingDataset: determinism, epochs, ranks, pad/drop, sources, strict restore (no DataLoader)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from training_data import keys_of, write_dataset

from shardstream.errors import ConfigError, ShardError
from shardstream.indexed import IndexedDataset, ShardIndex, index_dataset
from shardstream.training import TrainingDataset

MODES = ["global", "window", "stream", "none"]


def run(ds, epoch=0):
    ds.set_epoch(epoch)
    return keys_of(list(ds))


@pytest.mark.parametrize("shuffle", MODES)
def test_one_epoch_is_every_sample_once_and_is_reproducible(shards, shuffle):
    ds = TrainingDataset(shards, batch_size=8, shuffle=shuffle, buffer=10, window=2)
    first = run(ds)
    assert sorted(first) == list(range(59)) and len(ds) == 8
    assert run(ds) == first == run(TrainingDataset(shards, batch_size=8, shuffle=shuffle, buffer=10, window=2))
    if shuffle != "none":
        assert run(ds, 1) != first and sorted(run(ds, 1)) == list(range(59))
        assert run(TrainingDataset(shards, batch_size=8, shuffle=shuffle, seed=1, buffer=10, window=2)) != first
    else:
        assert first == list(range(59))


def test_each_iteration_is_the_next_epoch(shards):
    ds = TrainingDataset(shards, batch_size=10)
    assert ds.epoch == 0
    a, b = keys_of(list(ds)), keys_of(list(ds))
    assert ds.epoch == 2 and a != b and a == run(TrainingDataset(shards, batch_size=10), 0)


def test_no_global_random_state_time_or_process_id(shards):
    random.seed(5)
    np.random.seed(5)
    expected = random.random(), np.random.random()
    random.seed(5)
    np.random.seed(5)
    run(TrainingDataset(shards, batch_size=8))
    run(TrainingDataset(shards, batch_size=8, shuffle="stream", buffer=10))
    assert (random.random(), np.random.random()) == expected
    script = ("import sys, json; from shardstream.training import TrainingDataset as T; "
              "print(json.dumps([[str(k) for b in T(sys.argv[1:], batch_size=8, shuffle=m, buffer=10) "
              "for k in b['__key__']] for m in ('global', 'stream')]))")
    outputs = {
        subprocess.run([sys.executable, "-c", script, *shards], capture_output=True, text=True, check=True,
                       env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout
        for seed in (1, 2)
    }
    assert len(outputs) == 1  # another process, pid, time and hash seed: the same sequence


@pytest.mark.parametrize("shuffle", ["global", "stream"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_split_exactly_with_equal_batches(shards, shuffle, drop_last):
    world = 3
    ranks = [TrainingDataset(shards, batch_size=4, shuffle=shuffle, buffer=10, drop_last=drop_last, rank=r,
                             world_size=world) for r in range(world)]
    batches = [list(ds) for ds in ranks]
    assert len({len(b) for b in batches}) == 1 and len({len(ds) for ds in ranks}) == 1
    assert [len(b["__key__"]) for b in batches[0]] == [len(b["__key__"]) for b in batches[2]]
    seen = [k for b in batches for k in keys_of(b)]
    if drop_last:  # 59 -> 48 (12 full batches of 4 over 3 ranks), nothing twice
        assert len(seen) == len(set(seen)) == 48
    else:  # 59 -> 60: one sample twice
        assert sorted(set(seen)) == list(range(59)) and len(seen) == 60


def test_fewer_shards_than_ranks_splits_inside_shards(two_shards):
    ranks = [TrainingDataset(two_shards, batch_size=3, rank=r, world_size=8) for r in range(8)]
    seen = [keys_of(list(ds)) for ds in ranks]
    assert {len(s) for s in seen} == {5} and sorted(sum(seen, [])) == list(range(40))


def test_decode_map_and_collate(shards):
    ds = TrainingDataset(shards, batch_size=5, decode=True, map=lambda s: (s["cls"], s["txt"]), collate=None,
                         shuffle="none")
    first = next(iter(ds))
    assert first == [(n, f"sample {n}") for n in range(5)]
    batch = next(iter(TrainingDataset(shards, batch_size=5, decode=True, shuffle="none")))
    assert batch["cls"].tolist() == [0, 1, 2, 3, 4] and batch["txt"][0] == "sample 0"


def test_sources_dataset_index_indexed_dataset_and_read_only_folders(tmp_path, monkeypatch):
    paths = write_dataset(tmp_path / "data", [7, 7, 6])
    expected = run(TrainingDataset(paths, batch_size=4))
    assert all(os.path.exists(p + ".ssidx") for p in paths)  # indexed on the fly, sidecars saved
    index_dataset(paths, tmp_path / "data" / "train.json")
    assert run(TrainingDataset(str(tmp_path / "data" / "train.json"), batch_size=4)) == expected
    assert run(TrainingDataset(IndexedDataset(paths), batch_size=4)) == expected
    assert run(TrainingDataset(str(tmp_path / "data" / "train.json"), batch_size=4, shuffle="stream")) == \
        run(TrainingDataset(paths, batch_size=4, shuffle="stream"))
    frozen = write_dataset(tmp_path / "frozen", [5, 5])
    save = ShardIndex.save

    def read_only_folder(index, path=None):
        if path is None or str(path).startswith(str(tmp_path / "frozen")):
            raise PermissionError(13, "Permission denied", str(path))
        return save(index, path)

    monkeypatch.setattr(ShardIndex, "save", read_only_folder)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert sorted(run(TrainingDataset(frozen, batch_size=3))) == list(range(10))  # a private index instead
    assert not any(os.path.exists(p + ".ssidx") for p in frozen)
    assert len(os.listdir(tmp_path / "shardstream-index")) == 2


def test_stream_lengths_given_or_wrong(shards):
    counts = [12, 12, 12, 12, 11]
    given = TrainingDataset(shards, batch_size=8, shuffle="stream", lengths=counts, buffer=10)
    assert run(given) == run(TrainingDataset(shards, batch_size=8, shuffle="stream", buffer=10))
    assert TrainingDataset(shards, batch_size=8, shuffle="stream", lengths=dict(zip(shards, counts))).lengths == \
        tuple(counts)
    wrong = TrainingDataset(shards, batch_size=8, shuffle="stream", lengths=[12, 12, 12, 12, 15], buffer=100)
    with pytest.raises(ShardError, match=r"ended after 11 samples.*says it has 15"):
        run(wrong)
    with pytest.raises(ConfigError, match="5 shards"):
        TrainingDataset(shards, batch_size=8, shuffle="stream", lengths=[1, 2])


def test_resume_without_a_loader_and_states_are_plain_data(shards):
    ds = TrainingDataset(shards, batch_size=6, seed=3)
    ds.set_epoch(2)
    it = iter(ds)
    head = [next(it) for _ in range(4)]
    state = ds.state_dict()
    assert json.loads(json.dumps(state)) == state and state["epoch"] == 2 and state["batches"] == 4
    rest = keys_of(list(it))
    fresh = TrainingDataset(shards, batch_size=6, seed=3)
    fresh.load_state_dict(state)
    fresh.set_epoch(2)  # the usual training loop: the same epoch keeps the restored position
    assert len(fresh) == 6 and keys_of(list(fresh)) == rest
    assert sorted(keys_of(head) + rest) == list(range(59))
    assert fresh.state_dict()["epoch"] == 3 and fresh.state_dict()["batches"] == 0  # the next epoch's start
    other = TrainingDataset(shards, batch_size=6, seed=3)
    other.load_state_dict(state)
    other.set_epoch(5)  # another epoch: the restored position is dropped
    assert sorted(keys_of(list(other))) == list(range(59))


def test_incompatible_states_are_refused_naming_the_difference(shards):
    state = TrainingDataset(shards, batch_size=6, seed=1).state_dict()
    with pytest.raises(ConfigError, match=r"saved state has seed=1, this dataset has seed=2"):
        TrainingDataset(shards, batch_size=6, seed=2).load_state_dict(state)
    with pytest.raises(ConfigError, match=r"shuffle='global', this dataset has shuffle='window'"):
        TrainingDataset(shards, batch_size=6, seed=1, shuffle="window").load_state_dict(state)
    with pytest.raises(ConfigError, match=r"samples=59, this dataset has samples=48"):
        TrainingDataset(shards[:4], batch_size=6, seed=1).load_state_dict(state)
    with pytest.raises(ConfigError, match=r"lacks the key 'plan'"):
        TrainingDataset(shards, batch_size=6, seed=1).load_state_dict({k: v for k, v in state.items() if k != "plan"})
    with pytest.raises(ConfigError, match="version 99"):
        TrainingDataset(shards, batch_size=6, seed=1).load_state_dict(dict(state, version=99))


def test_one_state_format_and_the_old_training_format_is_refused_saying_so(shards):
    state = TrainingDataset(shards, batch_size=6, seed=1).state_dict()
    assert (state["format"], state["version"], state["kind"]) == ("shardstream.state", 2, "training")
    assert state["fingerprint"]["seed"] == 1 and state["fingerprint"]["samples"] == 59
    old = {"format": "shardstream.training", "version": 1, "config": state["fingerprint"], "epoch": 0,
           "plan": state["plan"], "batches": 0}
    with pytest.raises(ConfigError, match=r"'shardstream.training' version 1, the format of shardstream before "
                                          r"'shardstream.state' version 2; old states are not restored"):
        TrainingDataset(shards, batch_size=6, seed=1).load_state_dict(old)
    with pytest.raises(ConfigError, match=r"saved state has seed=1, this dataset has seed=2; saved state has "
                                          r"shuffle='global', this dataset has shuffle='none'"):
        TrainingDataset(shards, batch_size=6, seed=2, shuffle="none").load_state_dict(state)  # every difference


def test_invalid_arguments(shards):
    with pytest.raises(ConfigError, match="shuffle must be one of"):
        TrainingDataset(shards, batch_size=4, shuffle="sliding")
    with pytest.raises(ConfigError, match="batch_size"):
        TrainingDataset(shards, batch_size=0)
    with pytest.raises(ConfigError, match="rank and world_size"):
        TrainingDataset(shards, batch_size=4, rank=2, world_size=2)
    with pytest.raises(ConfigError, match="random access"):
        TrainingDataset(IndexedDataset(shards), batch_size=4, shuffle="stream")


def test_state_after_set_epoch_is_the_start_of_that_epoch(shards):
    """A checkpoint taken between epochs (after set_epoch, before iterating) resumes the epoch asked for."""
    ds = TrainingDataset(shards, batch_size=8)
    list(ds)  # epoch 0, finished
    ds.set_epoch(5)
    state = ds.state_dict()
    assert state["epoch"] == 5
    resumed = TrainingDataset(shards, batch_size=8)
    resumed.load_state_dict(state)
    assert keys_of(list(resumed)) == run(TrainingDataset(shards, batch_size=8), 5)
    # mid-epoch, set_epoch with the same epoch keeps the live position
    ds = TrainingDataset(shards, batch_size=8)
    ds.set_epoch(2)
    it = iter(ds)
    next(it)
    ds.set_epoch(2)
    assert ds.state_dict() == it.state_dict()
