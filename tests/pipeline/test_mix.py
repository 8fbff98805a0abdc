"""RandomMix and RoundRobin: proportions, longest, determinism per (seed, epoch), DataLoader workers, resume, errors."""

from __future__ import annotations

import json
import os
import pickle

import pytest

import shardstream as wds
from shardstream.errors import ConfigError
from shardstream.pipeline import DataPipeline, RandomMix, RoundRobin, batched, map, shuffle
from shardstream.testing import assert_checkpoint_conformance


def source_of(item: int) -> int:
    return item // 10_000


def counts(items, n):
    return [sum(1 for x in items if source_of(x) == k) for k in range(n)]


THREE = [range(0, 10_000), range(10_000, 20_000), range(20_000, 30_000)]


# -- proportions ------------------------------------------------------------------------------------------------
def test_proportions_follow_the_normalised_probs():
    mix = RandomMix(THREE, probs=[5, 3, 2], seed=0)
    assert mix.probs == [0.5, 0.3, 0.2]
    head = list(mix)[:10_000]  # the first source lasts at least 10_000 draws: none is exhausted yet
    assert all(abs(c / 10_000 - p) < 0.015 for c, p in zip(counts(head, 3), [0.5, 0.3, 0.2]))
    assert counts(head, 3) == [4973, 3022, 2005]  # deterministic: pinned for seed 0, epoch 0


def test_equal_weights_by_default_and_order_within_each_dataset_is_kept():
    items = list(RandomMix(THREE, seed=1))[:6000]
    assert all(abs(c - 2000) < 150 for c in counts(items, 3))
    for k in range(3):
        mine = [x for x in items if source_of(x) == k]
        assert mine == list(THREE[k][: len(mine)])


def test_weight_zero_is_never_drawn():
    items = list(RandomMix([range(5), range(10_000, 10_005)], probs=[1, 0], longest=True))
    assert items == [0, 1, 2, 3, 4]


# -- longest ----------------------------------------------------------------------------------------------------
def test_shortest_stops_at_the_first_draw_of_an_exhausted_dataset():
    items = list(RandomMix([range(5), range(10_000, 10_100)], seed=2))
    assert [x for x in items if x < 5] == [0, 1, 2, 3, 4]  # the short one was used up...
    assert [x for x in items if x >= 10_000] == list(range(10_000, 10_000 + len(items) - 5))
    assert len(items) < 50  # ...and the mix ended soon after, the long one unfinished


def test_longest_continues_with_the_others_renormalised():
    small, big1, big2 = range(0, 100), range(10_000, 13_000), range(20_000, 23_000)
    items = list(RandomMix([small, big1, big2], probs=[0.5, 0.25, 0.25], longest=True, seed=3))
    assert sorted(items) == [*small, *big1, *big2]  # every item once
    last_small = max(i for i, x in enumerate(items) if x < 100)
    after = items[last_small + 1 : last_small + 2001]
    first, second = counts(after, 3)[1:]
    assert abs(first - second) < 200  # 0.25 : 0.25 of what is left is 1:1


def test_round_robin_shortest_and_longest():
    assert list(RoundRobin([range(3), range(10, 15), "xy"])) == [0, 10, "x", 1, 11, "y", 2, 12]
    assert list(RoundRobin([range(3), range(10, 15), "xy"], longest=True)) == [
        0, 10, "x", 1, 11, "y", 2, 12, 13, 14]


# -- determinism ------------------------------------------------------------------------------------------------
def test_same_seed_and_epoch_same_order_other_epoch_or_seed_another():
    def run(seed, epoch):
        mix = RandomMix(THREE, probs=[1, 1, 2], seed=seed)
        mix.set_epoch(epoch)
        return list(mix)[:3000]

    assert run(0, 4) == run(0, 4)
    assert run(0, 4) != run(0, 5)
    assert run(0, 4) != run(1, 4)


def test_each_iteration_is_the_next_epoch_and_set_epoch_reaches_the_datasets(shards):
    a, b = shards
    datasets = [wds.WebDataset(a, shardshuffle=True, seed=1).shuffle(5), wds.WebDataset(b, shardshuffle=True)]
    mix = RandomMix(datasets, longest=True, seed=7)
    mix.set_epoch(3)
    assert [d.epoch for d in datasets] == [3, 3]
    epoch3, epoch4 = [s["__key__"] for s in mix], [s["__key__"] for s in mix]
    assert epoch3 != epoch4 and sorted(epoch3) == sorted(epoch4)

    again = RandomMix([wds.WebDataset(a, shardshuffle=True, seed=1).shuffle(5), wds.WebDataset(b, shardshuffle=True)],
                      longest=True, seed=7)
    again.set_epoch(4)
    assert [s["__key__"] for s in again] == epoch4  # the datasets' own shuffles follow the mix's epoch too


# -- torch ------------------------------------------------------------------------------------------------------
def test_dataloader_workers_serve_every_sample_once_per_epoch(shards):
    torch = pytest.importorskip("torch")
    a, b = shards
    mix = RandomMix([wds.WebDataset(a, shardshuffle=True), wds.WebDataset(b, shardshuffle=True)], probs=[3, 1],
                    longest=True, seed=0)
    assert isinstance(mix, torch.utils.data.IterableDataset)
    everything = sorted(key(s) for s in wds.WebDataset(a + b))
    orders = []
    for epoch in range(2):
        mix.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(mix, batch_size=None, num_workers=2)
        served = [key(s) for s in loader]
        assert sorted(served) == everything
        orders.append(served)
    assert orders[0] != orders[1]


def test_torchdata_stateful_dataloader_with_workers(shards):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    a, b = shards

    def make():
        mix = RandomMix([wds.WebDataset(a), wds.WebDataset(b)], longest=True, seed=0).shuffle(4).map(key)
        return stateful.StatefulDataLoader(mix, batch_size=None, num_workers=2)

    assert_checkpoint_conformance(make, points=[0, 5, 20], epochs=1)


# -- resume -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("longest", [False, True])
def test_random_mix_of_webdatasets_resumes(shards, longest):
    a, b = shards

    def make():
        datasets = [wds.WebDataset(a, shardshuffle=True, seed=1).shuffle(5), wds.WebDataset(b, shardshuffle=True)]
        return RandomMix(datasets, probs=[2, 1], longest=longest, seed=4).shuffle(6).map(key)

    items = assert_checkpoint_conformance(make)
    assert (len(items) == 42) if longest else (len(items) < 42)


def test_round_robin_resumes_and_a_mix_can_be_the_source_of_a_pipeline(shards):
    a, b = shards
    assert_checkpoint_conformance(
        lambda: RoundRobin([wds.WebDataset(a), wds.WebDataset(b).shuffle(4), range(5)], longest=True).shuffle(3))
    assert_checkpoint_conformance(
        lambda: DataPipeline(RandomMix([wds.WebDataset(a, shardshuffle=True), wds.WebDataset(b)], seed=2),
                             map(key), shuffle(5), batched(3, collation_fn=None)))


def test_random_mix_of_training_datasets_resumes(shards):
    from shardstream.training import TrainingDataset

    a, b = shards

    def make(longest):
        return RandomMix([TrainingDataset(a, batch_size=3, seed=1),
                          TrainingDataset(b, batch_size=4, shuffle="stream", buffer=5, seed=2)],
                         longest=longest, seed=3).map(lambda batch: batch["__key__"])

    for longest in (False, True):
        assert_checkpoint_conformance(lambda: make(longest))  # noqa: B023


def test_an_iterator_moves_between_saved_positions_in_place():
    # what a shuffle after the mix does when it restores its buffer; the draws come in blocks of mix.BLOCK
    def make():
        return RandomMix([range(1000), range(10_000, 11_000)], seed=0)

    reference, it, states = list(make()), iter(make()), {}
    for n in range(800):
        if n in (10, 300, 700):
            states[n] = it.state_dict()
        next(it)
    it = iter(make())
    for n in (10, 300, 700, 300, 10):  # forward across blocks, then back
        it.load_state_dict(states[n])
        assert [next(it) for _ in range(5)] == reference[n : n + 5]
    assert_checkpoint_conformance(lambda: make().shuffle(300), points=[0, 280, 600])


def test_restoring_replays_the_draws_and_reads_nothing_again():
    calls = []

    def watched(x):
        calls.append(x)
        return x

    def make():
        return RandomMix([DataPipeline(range(0, 5000)).map(watched), range(10_000, 15_000)], longest=True, seed=5)

    mix = make()
    it = iter(mix)
    head = [next(it) for _ in range(3000)]
    state = json.loads(json.dumps(mix.state_dict()))  # plain data
    chain = state["chain"]
    assert set(chain) == {"draws", "exhausted", "longest", "probs", "sources"}
    assert chain["draws"] == 3000 and chain["exhausted"] == [] and len(chain["sources"]) == 2
    rest = list(it)
    calls.clear()
    restored = make()
    restored.load_state_dict(state)
    assert list(restored) == rest
    assert len(calls) == sum(1 for x in rest if x < 5000)  # only the items served after the restore
    assert sorted(head + rest) == [*range(5000), *range(10_000, 15_000)]


def test_strict_restore_names_what_is_wrong():
    mix = RandomMix([range(10), range(10, 20)], seed=0)
    it = iter(mix)
    next(it)
    state = mix.state_dict()

    def restore(into, chain):
        into.load_state_dict(dict(state, chain=chain))
        next(iter(into))

    lacking = {k: v for k, v in state["chain"].items() if k != "draws"}
    with pytest.raises(ConfigError, match="RandomMix: its state lacks the key 'draws'"):
        restore(RandomMix([range(10), range(10, 20)], seed=0), lacking)
    with pytest.raises(ConfigError, match=r"saved state has probs=\[0.5, 0.5\], this RandomMix has probs=\[0.75"):
        restore(RandomMix([range(10), range(10, 20)], probs=[3, 1], seed=0), state["chain"])
    with pytest.raises(ConfigError, match=r"the state has 2 datasets \('sources'\), this RandomMix has 3"):
        restore(RandomMix([range(10), range(10, 20), range(5)], probs=[1, 1, 0], seed=0), state["chain"])
    with pytest.raises(ConfigError, match="saved state has seed=0, this pipeline has seed=1"):
        RandomMix([range(10), range(10, 20)], seed=1).load_state_dict(state)
    with pytest.raises(ConfigError, match="saved state has stages"):
        RoundRobin([range(10), range(10, 20)]).load_state_dict(state)


def test_a_mix_is_a_picklable_recipe():
    mix = RandomMix([range(3), [10, 11]], probs=[1, 2], longest=True, seed=9).batched(2, collation_fn=None)
    copy = pickle.loads(pickle.dumps(mix))
    assert list(copy) == list(mix)
    assert "RandomMixSource([range, list], longest=True, probs=[0.3333, 0.6667])" in repr(mix)


# -- errors -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("datasets, probs, message", [
    ([], None, "RandomMix needs at least one dataset; the list is empty"),
    ("abc", None, "RandomMix needs a list of datasets, not 'abc'"),
    ([range(3), range(3)], [1], "1 probs for 2 datasets; give one weight per dataset"),
    ([range(3), range(3)], [1, -0.5], r"probs\[1\] is -0.5; weights must be finite numbers >= 0"),
    ([range(3), range(3)], [1, float("nan")], r"probs\[1\] is nan"),
    ([range(3), range(3)], [0, 0], r"the probs \[0, 0\] sum to 0; at least one weight must be positive"),
    ([range(3), range(3)], 1, "probs must be a list of numbers"),
])
def test_invalid_arguments_are_refused(datasets, probs, message):
    with pytest.raises(ConfigError, match=message):
        RandomMix(datasets, probs)


def test_round_robin_needs_datasets():
    with pytest.raises(ConfigError, match="RoundRobin needs at least one dataset"):
        RoundRobin([])


# -- fixtures ---------------------------------------------------------------------------------------------------
def key(sample):
    """A sample's identity across both datasets (their keys overlap: the shard names differ)."""
    return f"{os.path.basename(sample['__url__'])[0]}:{sample['__key__']}"


@pytest.fixture
def shards(make_shards):
    """Two datasets: 'a' (3 shards of 8 samples) and 'b' (2 shards of 9)."""
    return make_shards(3, 8, prefix="a"), make_shards(2, 9, prefix="b")
