"""Resumable WebDataset/DataPipeline: bounded re-reading, strict restore, stages without state, loaders."""

from __future__ import annotations

import collections
import json

import pytest

import shardstream as wds
import shardstream.pipeline.stages.reading as tariterators
from shardstream.errors import ConfigError
from shardstream.pipeline import DataPipeline, shuffle, stage


def keys(items):
    return [s["__key__"] for s in items]


def test_restoring_rereads_only_the_shards_under_the_buffer(shards, monkeypatch):
    read = collections.Counter()
    samples = tariterators._tarfile_samples

    def counting(*args, **kwargs):
        for sample in samples(*args, **kwargs):
            read[sample["__url__"]] += 1
            yield sample

    def make():
        return wds.WebDataset(shards, shardshuffle=True, seed=1).shuffle(10)

    reference = make()
    it = iter(reference)
    head = keys(next(it) for _ in range(50))
    state = reference.state_dict()
    assert json.loads(json.dumps(state)) == state  # plain data
    monkeypatch.setattr(tariterators, "_tarfile_samples", counting)
    restored = make()
    restored.load_state_dict(state)
    rest = keys(restored)
    assert rest == keys(it) and sorted(head + rest) == sorted(f"s{n:05d}" for n in range(59))
    assert sum(read.values()) <= 9 + 2 * 12  # the rest (9), and at most the prefixes of two shards


def test_a_dropped_iterator_leaves_its_position(shards):
    ds = wds.WebDataset(shards, shardshuffle=True).shuffle(5)
    for i, sample in enumerate(ds):
        if i == 10:
            break
    state = ds.state_dict()  # the loop's iterator is gone; its position is not
    full = keys(wds.WebDataset(shards, shardshuffle=True).shuffle(5))
    again = wds.WebDataset(shards, shardshuffle=True).shuffle(5)
    again.load_state_dict(state)
    assert keys(again) == full[11:]


def test_states_from_elsewhere_are_refused(shards, monkeypatch):
    ds = wds.WebDataset(shards).shuffle(5)
    state = ds.state_dict()
    with pytest.raises(ConfigError, match=r"saved state has stages .*'shuffle'\], this pipeline has .*'decode'\]"):
        wds.WebDataset(shards).decode().load_state_dict(state)
    with pytest.raises(ConfigError, match=r"saved state has seed=0, this pipeline has seed=4"):
        wds.WebDataset(shards, seed=4).shuffle(5).load_state_dict(state)
    with pytest.raises(ConfigError, match=r"lacks the key 'chain'"):
        wds.WebDataset(shards).shuffle(5).load_state_dict({k: v for k, v in state.items() if k != "chain"})
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match=r"saved on rank 0 of 1.*this is rank 1 of 2"):
        wds.WebDataset(shards).shuffle(5).load_state_dict(state)


def test_a_changed_shard_list_is_detected(shards):
    ds = wds.WebDataset(shards)
    it = iter(ds)
    for _ in range(15):
        next(it)
    state = ds.state_dict()
    with pytest.raises(ConfigError, match="the shard list now gives"):
        restored = wds.WebDataset(shards[1:] + shards[:1])
        restored.load_state_dict(dict(state, fingerprint=state["fingerprint"]))
        next(iter(restored))


def test_stages_without_state_are_named_and_can_be_declared():
    plain = DataPipeline(range(10), lambda source: (x + 1 for x in source), shuffle(3))
    it = iter(plain)
    next(it)
    with pytest.raises(ConfigError, match=r"stage 1 \(.*<lambda>\) cannot save its position.*state='pass'"):
        plain.state_dict()

    @stage(state="pass")
    def _plus_one(source):
        for x in source:
            yield x + 1

    declared = DataPipeline(range(10), _plus_one(), shuffle(3))
    it = iter(declared)
    head = [next(it) for _ in range(3)]
    state = declared.state_dict()
    again = DataPipeline(range(10), _plus_one(), shuffle(3))
    again.load_state_dict(state)
    assert head + list(again) == list(DataPipeline(range(10), _plus_one(), shuffle(3)))
    from shardstream.pipeline.core import unregister

    unregister("plus_one")


def test_loaders_say_what_they_cannot_save(shards):
    torch = pytest.importorskip("torch")
    with_workers = wds.WebLoader(wds.WebDataset(shards).batched(4), batch_size=None, num_workers=2)
    it = iter(with_workers)
    next(it)
    state = with_workers.state_dict()  # workers say nothing: the batches handed out, replayed on restore
    rest = [b["__key__"] for b in it]
    again = wds.WebLoader(wds.WebDataset(shards).batched(4), batch_size=None, num_workers=2)
    again.load_state_dict(state)
    assert [b["__key__"] for b in again] == rest
    rebatched = wds.WebLoader(wds.WebDataset(shards).batched(4), batch_size=None, num_workers=0).unbatched().shuffle(8)
    it = iter(rebatched)
    next(it)
    with pytest.raises(ConfigError, match=r"stage \d \(shuffle\) cannot save its buffer"):
        rebatched.state_dict()
    assert torch is not None
