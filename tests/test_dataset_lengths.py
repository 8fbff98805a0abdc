"""len() of a plain WebDataset/WebLoader from the shards' sample counts (sidecar indexes, a dataset index), exact
for what each rank and DataLoader worker yields, or a TypeError; the even split between ranks (UnevenSplitError
by default, equalize=True for equal shares). Ranks and workers are simulated here (RANK/WORLD_SIZE, the worker
lookup); tests/integrations/test_webdataset_ddp.py runs real gloo processes."""

from __future__ import annotations

import os
import pickle

import pytest

import shardstream as wds
from shardstream import runtime
from shardstream.indexed import index_dataset
from shardstream.testing import write_shards

SIZES = [15] * 6 + [10]


@pytest.fixture
def shards(tmp_path):
    paths = write_shards(tmp_path / "shards", SIZES, {"cls": lambda shard, index, number: number})
    index_dataset(paths, tmp_path / "index.json")
    return paths


def _numbers(sample):
    return int(sample["cls"])


def _as(monkeypatch, rank=0, world=1, worker=0, workers=1):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setattr(runtime, "worker_info", lambda: (worker, workers, None) if workers > 1 else (0, 1, None))


def test_len_from_sidecars_and_from_a_dataset_index(shards, tmp_path):
    assert len(wds.WebDataset(shards)) == 100 == len(list(wds.WebDataset(shards)))
    from_index = wds.WebDataset(str(tmp_path / "index.json"), shardshuffle=True).decode().map(_numbers)
    assert len(from_index) == 100 and sorted(from_index) == list(range(100))
    os.remove(shards[3] + ".ssidx")  # the dataset index still knows; the shards alone no longer do
    assert len(wds.WebDataset(str(tmp_path / "index.json"))) == 100
    with pytest.raises(TypeError, match=r"shard-000003.tar' are not known: it has no sidecar index"):
        len(wds.WebDataset(shards))


def test_a_stale_sidecar_gives_no_length(shards):
    write_shards(os.path.dirname(shards[0]), [3], name="shard-000000.tar")  # rewritten, the sidecar left as it was
    with pytest.raises(TypeError, match="stale"):
        len(wds.WebDataset(shards))


def test_a_command_is_never_run_to_count_a_shard(shards, tmp_path, monkeypatch):
    """A pipe: shard has its sidecar next to the file the command reads, but counting never runs the command (nor
    a URL that the rewrite rules turn into one)."""
    marker = tmp_path / "ran"
    url = f"pipe:touch {marker} && cat {shards[0]}"
    with pytest.raises(TypeError, match="read through a command"):
        len(wds.WebDataset([url]))
    monkeypatch.setenv("SHARDSTREAM_URL_REWRITES", "counted:=pipe:")
    with pytest.raises(TypeError, match="read through a command"):
        len(wds.WebDataset(["counted:true"]))
    assert not marker.exists()


@pytest.mark.parametrize("build, reason", [
    (lambda s: wds.WebDataset(s, select_files=lambda name: True), "select_files"),
    (lambda s: wds.WebDataset(s, resampled=True), "resampled"),
    (lambda s: wds.WebDataset(s).select(lambda sample: True), "'select'"),
    (lambda s: wds.WebDataset(s).batched(8).unbatched(), "'unbatched'"),
    (lambda s: wds.WebDataset(s).batched(8), "depends on how many DataLoader workers"),
])
def test_no_length_where_the_count_is_not_exact(shards, build, reason):
    with pytest.raises(TypeError, match=reason):
        len(build(shards))


def test_a_declared_length_wins(shards):
    assert len(wds.WebDataset(shards).batched(8).with_length(5)) == 5


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("equalize", [False, True])
def test_lengths_are_what_each_rank_and_worker_yields(shards, monkeypatch, world, workers, equalize):
    """For every rank and worker, in two epochs: len() and worker_lengths() against what iterating gives."""
    if world > 1 and len(SIZES) % world and not equalize:
        return  # refused (test_uneven_shards_are_refused)
    if workers > len(SIZES) // world:  # a worker of some rank would get no shard (or keep no sample): refused
        _as(monkeypatch, world - 1, world, workers - 1, workers)
        with pytest.raises(wds.WorkerSplitError, match="received no shard|keeps no sample with equalize=True"):
            list(wds.WebDataset(shards, equalize=equalize))
        return
    per_rank = {}
    for rank in range(world):
        for epoch in (0, 1):
            _as(monkeypatch, rank, world)
            ds = wds.WebDataset(shards, shardshuffle=True, equalize=equalize).map(_numbers)
            ds.set_epoch(epoch)
            batched = ds.batched(4, partial=False)
            predicted, batches, total = ds.worker_lengths(workers), batched.worker_lengths(workers), len(ds)
            seen = []
            for worker in range(workers):
                _as(monkeypatch, rank, world, worker, workers)
                ds.set_epoch(epoch)  # (an iteration moves on to the next epoch; len() is the next epoch's)
                batched.set_epoch(epoch)
                if workers > 1:  # len() inside a worker: its own part
                    assert len(ds) == predicted[worker] and len(batched) == batches[worker]
                got = list(ds)
                assert len(got) == predicted[worker] and len(list(batched)) == batches[worker]
                seen += got
            assert len(seen) == total
            per_rank[(rank, epoch)] = seen
    for epoch in (0, 1):
        everything = [n for rank in range(world) for n in per_rank[(rank, epoch)]]
        assert len(everything) == len(set(everything))  # nothing twice
        if not equalize:
            assert sorted(everything) == list(range(100))
        else:
            assert len({len(per_rank[(rank, epoch)]) for rank in range(world)}) == 1  # equal shares


def test_uneven_shards_are_refused(shards, monkeypatch):
    _as(monkeypatch, 1, 2)
    with pytest.raises(wds.UnevenSplitError, match="7 shards cannot be split evenly between 2 ranks") as caught:
        next(iter(wds.WebDataset(shards)))
    assert (caught.value.shards, caught.value.ranks) == (7, 2)
    assert isinstance(caught.value, wds.WorkerSplitError) and isinstance(caught.value, ValueError)
    # webdataset's idioms keep running: an epoch length, resampling, an endless repeat
    assert len(list(wds.WebDataset(shards).with_epoch(20))) == 20
    assert len(list(wds.WebDataset(shards, resampled=True).with_epoch(20))) == 20
    assert len(list(wds.WebDataset(shards, nodesplitter=None))) == 100  # not split: every rank reads everything
    _as(monkeypatch, 1, 3)
    with pytest.raises(wds.UnevenSplitError):
        next(iter(wds.WebDataset(shards)))
    _as(monkeypatch, 1, 7)
    assert len(list(wds.WebDataset(shards))) == 15


def test_equalize_needs_counts(shards, monkeypatch):
    for shard in shards:
        os.remove(shard + ".ssidx")
    assert len(list(wds.WebDataset(shards, equalize=True))) == 100  # one rank: nothing to equalize
    _as(monkeypatch, 0, 2)
    with pytest.raises(wds.ConfigError, match="equalize=True needs the samples of every shard.*with_epoch"):
        list(wds.WebDataset(shards, equalize=True))
    with pytest.raises(wds.ConfigError, match="equalize=True needs a list of shard URLs"):
        wds.WebDataset(shards, equalize=True, resampled=True)


def test_equalize_names_a_worker_left_without_samples(shards, monkeypatch):
    _as(monkeypatch, 0, 3, 2, 3)  # rank 0 has 3 shards, ranks 1 and 2 two: position 2 keeps nothing
    with pytest.raises(wds.WorkerSplitError, match="worker 2 of 3 on rank 0 keeps no sample.*at most 2 workers"):
        list(wds.WebDataset(shards, equalize=True))
    assert list(wds.WebDataset(shards, equalize=True, empty_check=False)) == []


def test_equalize_resumes_mid_shard(shards, monkeypatch):
    _as(monkeypatch, 1, 2)
    ds = wds.WebDataset(shards, shardshuffle=True, equalize=True).map(_numbers)
    ds.set_epoch(1)
    it = iter(ds)
    head = [next(it) for _ in range(20)]
    state = ds.state_dict()
    rest = list(it)
    again = wds.WebDataset(shards, shardshuffle=True, equalize=True).map(_numbers)
    again.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert list(again) == rest and len(head + rest) == len(ds)


@pytest.mark.parametrize("workers", [0, 2])
def test_len_of_a_webloader_in_batches(shards, workers):
    pytest.importorskip("torch")
    for drop_last in (False, True):
        loader = wds.WebLoader(wds.WebDataset(shards, shardshuffle=True).map(_numbers), batch_size=8,
                               num_workers=workers, drop_last=drop_last)
        for _ in range(2):
            expected = len(loader)
            assert len(list(loader)) == expected
    dataset_batches = wds.WebDataset(shards, shardshuffle=True).map(_numbers).batched(8)
    loader = wds.WebLoader(dataset_batches, batch_size=None, num_workers=workers)
    assert len(loader) == len(list(loader))
