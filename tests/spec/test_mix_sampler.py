"""ExactMixSampler: the exact mix in indexed mode, with a real DataLoader over a ConcatDataset of IndexedDatasets."""

from __future__ import annotations

import collections

import pytest

from shardstream.errors import ConfigError
from shardstream.indexed import IndexedDataset, index_dataset
from shardstream.indexed.mixsampler import ExactMixSampler
from shardstream.testing import write_shards


def test_counts_per_epoch_and_rank():
    sizes, counts = [50, 20, 10], [60, 30, 9]
    shares = [list(ExactMixSampler(sizes, counts, num_replicas=3, rank=r, seed=1)) for r in range(3)]
    assert [len(s) for s in shares] == [33, 33, 33]
    together = collections.Counter(0 if p < 50 else 1 if p < 70 else 2 for s in shares for p in s)
    assert together == {0: 60, 1: 30, 2: 9}
    first = [p for s in shares for p in s if p < 50]
    assert collections.Counter(collections.Counter(first).values()) == {1: 40, 2: 10}  # all 50 before repeats


def test_epochs_differ_and_resume_is_exact():
    sampler = ExactMixSampler([30, 30], [20, 20], seed=3)
    sampler.set_epoch(0)
    a = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != a
    sampler.set_epoch(1)
    it = iter(sampler)
    for _ in range(11):
        next(it)
    state = sampler.state_dict()
    again = ExactMixSampler([30, 30], [20, 20], seed=3)
    again.load_state_dict(state)
    assert list(again) == list(it)
    with pytest.raises(ConfigError, match="saved counts"):
        ExactMixSampler([30, 30], [10, 20]).load_state_dict(state)
    with pytest.raises(ConfigError):
        ExactMixSampler([0, 30], [1, 20])


def test_with_a_dataloader_over_indexed_sources(tmp_path):
    torch = pytest.importorskip("torch")
    sources = []
    for name, sizes in (("a", [6, 6]), ("b", [5])):
        shards = write_shards(tmp_path / name, sizes, {"src": name})
        index_dataset(shards, str(tmp_path / f"{name}.json"))
        sources.append(IndexedDataset(str(tmp_path / f"{name}.json"), decode=True))
    data = torch.utils.data.ConcatDataset(sources)
    sampler = ExactMixSampler(sources, counts=[8, 8], seed=0)
    loader = torch.utils.data.DataLoader(data, sampler=sampler, batch_size=None, num_workers=2)
    got = collections.Counter(sample["src"] for sample in loader)
    assert got == {b"a": 8, b"b": 8}
