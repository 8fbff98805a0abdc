"""Iterating an IndexedDataset is resumable like every recipe: state_dict / load_state_dict / set_epoch, one state
format (kind "indexed"), strict restore, torchdata's StatefulDataLoader; map-style access is unchanged."""

from __future__ import annotations

import json
import pickle

import pytest

from shardstream.errors import StateError
from shardstream.indexed import IndexedDataset, index_dataset
from shardstream.pipeline import DataPipeline, shuffle
from shardstream.testing import write_shards


@pytest.fixture
def index(tmp_path):
    paths = write_shards(tmp_path / "data", [4, 5, 3, 6])  # 18 samples, cls = number % 10
    return index_dataset(paths, tmp_path / "ds.json").path


def keys(samples):
    return [s["__key__"] for s in samples]


def test_a_dropped_iteration_resumes_at_the_next_row(index):
    ds = IndexedDataset(index, decode=True)
    everything = keys(IndexedDataset(index))
    it = iter(ds)
    head = [next(it) for _ in range(7)]
    del it  # a `break`: the dataset still knows where its iteration stopped
    state = json.loads(json.dumps(ds.state_dict()))
    assert (state["format"], state["version"], state["kind"], state["epoch"], state["next"]) == (
        "shardstream.state", 2, "indexed", 0, 7)
    fresh = IndexedDataset(index, decode=True)
    fresh.load_state_dict(state)
    rest = list(fresh)
    assert keys(head) + keys(rest) == everything
    assert fresh.epoch == 1 and fresh.state_dict()["next"] == 0 and fresh.state_dict()["epoch"] == 1


def test_epochs_and_the_iterator_own_state(index):
    ds = IndexedDataset(index)
    assert ds.state_dict() == ds.state_for(0, 0) and ds.epoch == 0
    assert len(list(ds)) == 18 and ds.epoch == 1
    it = iter(ds)
    next(it), next(it)
    assert it.state_dict()["next"] == 2 and it.state_dict()["epoch"] == 1
    other = iter(IndexedDataset(index))
    other.load_state_dict(it.state_dict())  # an iterator restores in place too
    assert keys(other) == keys(it)
    ds.set_epoch(5)
    assert ds.state_dict()["epoch"] == 5 and ds.state_dict()["next"] == 0
    restored = IndexedDataset(index)
    restored.load_state_dict(ds.state_for(5, 16))
    restored.set_epoch(5)  # the same epoch: the restored position is kept
    assert len(list(restored)) == 2
    restored.load_state_dict(ds.state_for(5, 16))
    restored.set_epoch(6)  # another epoch: it starts at its beginning
    assert len(list(restored)) == 18


def test_a_view_resumes_in_its_own_rows(index):
    ds = IndexedDataset(index)
    view = ds[3:15:2]
    it = iter(view)
    first = [next(it) for _ in range(2)]
    state = view.state_dict()
    assert state["fingerprint"]["rows"] == [3, 15, 2]
    again = IndexedDataset(index)[3:15:2]
    again.load_state_dict(state)
    rest = keys(again)
    assert keys(first) + rest == keys(ds[3:15:2]) and len(rest) == 4
    assert ds.state_dict()["next"] == 0  # the view's iteration is not the dataset's


def test_states_of_another_view_dataset_or_format_are_refused(index, tmp_path):
    ds = IndexedDataset(index)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    with pytest.raises(StateError, match=r"saved state has rows=\[0, 18, 1\], this dataset has rows=\[2, 18, 1\]"):
        ds[2:].load_state_dict(state)
    other = write_shards(tmp_path / "other", [4, 5, 3, 7])
    with pytest.raises(StateError, match=r"samples=18, this dataset has samples=19; saved state has shards='4:"):
        IndexedDataset(index_dataset(other, tmp_path / "other.json").path).load_state_dict(state)
    with pytest.raises(StateError, match=r"the state's kind is 'pipeline', not 'indexed'"):
        ds.load_state_dict(DataPipeline(range(3)).state_dict())
    with pytest.raises(StateError, match=r"'next' is 99"):
        ds.load_state_dict(dict(state, next=99))
    with pytest.raises(StateError, match="lacks the key 'next'"):
        ds.load_state_dict({k: v for k, v in state.items() if k != "next"})


def test_map_style_access_and_pickles_are_unchanged(index):
    ds = IndexedDataset(index)
    it = iter(ds)
    next(it)
    assert ds[3]["__key__"] == keys(IndexedDataset(index))[3] and len(ds) == 18
    copy = pickle.loads(pickle.dumps(ds))  # the iteration in progress does not travel
    assert copy.epoch == ds.epoch and copy.state_dict()["next"] == 0 and copy[17] == ds[17]


def test_a_pipeline_with_the_dataset_as_its_source_resumes(index):
    def make():
        return DataPipeline(IndexedDataset(index), shuffle(5, seed=1)).map(lambda s: s["__key__"])

    p = make()
    it = iter(p)
    head = [next(it) for _ in range(6)]
    state = json.loads(json.dumps(p.state_dict()))
    again = make()
    again.load_state_dict(state)
    assert sorted(head + list(again)) == sorted(keys(IndexedDataset(index)))


def test_torchdata_stateful_dataloader_without_workers(index):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def resumes(dataset):
        def loader():
            return stateful.StatefulDataLoader(dataset(), batch_size=None, num_workers=0,
                                               collate_fn=lambda s: s["__key__"])

        first = loader()
        it = iter(first)
        head = [next(it) for _ in range(5)]
        state = first.state_dict()
        second = loader()
        second.load_state_dict(state)
        assert head + list(second) == keys(IndexedDataset(index))

    resumes(lambda: DataPipeline(IndexedDataset(index)))  # iterable: StatefulDataLoader saves the iterator's state
    resumes(lambda: IndexedDataset(index))  # map-style: the sampler keeps the position, the dataset's state unharmed
