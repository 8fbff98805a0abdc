"""TrainingLoader over DataLoader workers: ordered rank sequences, mid-epoch and elastic resume, persistent
workers, torchdata's StatefulDataLoader protocol, and resuming without reading consumed data."""

from __future__ import annotations

import collections

import pytest
from training_data import keys_of

torch = pytest.importorskip("torch")

from shardstream.errors import ConfigError  # noqa: E402
from shardstream.training import TrainingDataset, TrainingLoader  # noqa: E402


def make(shards, shuffle="global", **kw):
    kw.setdefault("buffer", 10)
    return TrainingDataset(shards, batch_size=4, shuffle=shuffle, collate=None, **kw)


def loader(shards, workers, shuffle="global", **kw):
    return TrainingLoader(make(shards, shuffle, **kw), num_workers=workers, collate_fn=lambda batch: batch)


def test_the_rank_sequence_does_not_depend_on_the_number_of_workers(shards):
    runs = [keys_of(list(loader(shards, w))) for w in (0, 2, 3)]
    assert runs[0] == runs[1] == runs[2] and sorted(runs[0]) == list(range(59))
    stream = [keys_of(list(loader(shards, w, "stream"))) for w in (2, 2, 0)]
    assert stream[0] == stream[1] and sorted(stream[0]) == sorted(stream[2]) == list(range(59))


@pytest.mark.parametrize("shuffle", ["global", "stream"])
def test_mid_epoch_resume_with_workers_then_more_or_fewer_workers(shards, shuffle):
    full = keys_of(list(loader(shards, 2, shuffle)))
    for cut, workers in ((5, 2), (9, 3), (3, 0)):
        first = loader(shards, 2, shuffle)
        it = iter(first)
        head = keys_of([next(it) for _ in range(cut)])
        state = first.state_dict()
        del it
        again = loader(shards, workers, shuffle)
        again.load_state_dict(state)
        assert len(again) == 15 - cut
        rest = keys_of(list(again))
        assert head == full[: len(head)]
        if shuffle == "global" or workers == 2:
            assert rest == full[len(head):]  # exactly the uninterrupted run
        assert sorted(head + rest) == list(range(59))  # elastic: the same samples, none twice


@pytest.mark.parametrize("shuffle", ["global", "stream"])
def test_elastic_resume_on_more_ranks(shards, shuffle):
    before = [loader(shards, 0, shuffle, rank=r, world_size=2) for r in range(2)]
    consumed = []
    for rank in before:
        it = iter(rank)
        consumed += keys_of([next(it) for _ in range(3)])
        state = rank.state_dict()  # every rank's state says the same: any one restores all
    assert before[0].state_dict()["plan"] == before[1].state_dict()["plan"]
    after = [loader(shards, 2, shuffle, rank=r, world_size=3) for r in range(3)]
    rest = []
    for rank in after:
        rank.load_state_dict(state)
        rest.append(keys_of(list(rank)))
    assert len({len(r) for r in rest}) == 1  # equal shares on the new ranks
    counts = collections.Counter(consumed + sum(rest, []))
    assert set(counts) == set(range(59)) and sum(counts.values()) - 59 <= 2  # padding only (3 ranks: <= 2)


def test_epochs_advance_and_persistent_workers_follow(shards):
    plain = loader(shards, 2)
    epochs = [keys_of(list(plain)) for _ in range(2)]
    assert epochs[0] != epochs[1] and plain.epoch == 2
    kept = TrainingLoader(make(shards), num_workers=2, persistent_workers=True, collate_fn=lambda b: b)
    assert [keys_of(list(kept)) for _ in range(2)] == epochs
    workers = kept._persistent[0]
    kept.set_epoch(0)  # going back: the workers are re-created with the right epoch
    assert keys_of(list(kept)) == epochs[0] and kept._persistent[0] is not workers
    it = iter(kept)
    head = keys_of([next(it) for _ in range(4)])
    state = kept.state_dict()
    del it
    kept.load_state_dict(state)
    assert head + keys_of(list(kept)) == epochs[1]



@pytest.mark.parametrize("shuffle", ["global", "stream"])
def test_stateful_dataloader_protocol(shards, shuffle):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def sdl():
        return stateful.StatefulDataLoader(make(shards, shuffle), batch_size=None, num_workers=2,
                                           collate_fn=lambda b: b)

    full = keys_of(list(sdl()))
    first = sdl()
    it = iter(first)
    head = keys_of([next(it) for _ in range(6)])
    state = first.state_dict()
    del it
    second = sdl()
    second.load_state_dict(state)
    assert head + keys_of(list(second)) == full


@pytest.mark.parametrize("shuffle", ["global", "stream"])
def test_resuming_does_not_read_the_consumed_samples(shards, shuffle, monkeypatch):
    import shardstream.pipeline.stages.reading as tariterators
    from shardstream.training import iterators

    read = collections.Counter()
    indexed_read, stream_samples = iterators.IndexedReader.read, tariterators.tarfile_samples

    def count_indexed(self, positions):
        read["samples"] += len(positions)
        return indexed_read(self, positions)

    def count_stream(*args, **kwargs):
        for sample in stream_samples(*args, **kwargs):
            read["samples"] += 1
            yield sample

    monkeypatch.setattr(iterators.IndexedReader, "read", count_indexed)
    monkeypatch.setattr(tariterators, "tarfile_samples", count_stream)
    first = loader(shards, 0, shuffle, window=2)
    it = iter(first)
    for _ in range(13):  # 52 of 59 samples
        next(it)
    state = first.state_dict()
    read.clear()
    again = loader(shards, 0, shuffle, window=2)
    again.load_state_dict(state)
    assert len(keys_of(list(again))) == 7
    bound = 7 if shuffle == "global" else 7 + 10 + 2 * 12  # the block, and at most the 2 open shards' prefixes
    assert read["samples"] <= bound


def test_loader_arguments_and_states_it_refuses(shards):
    with pytest.raises(ConfigError, match="belong to the TrainingDataset"):
        TrainingLoader(make(shards), batch_size=4)
    with pytest.raises(ConfigError, match="in_order"):
        TrainingLoader(make(shards), in_order=False)
    with pytest.raises(ConfigError, match="needs a TrainingDataset"):
        TrainingLoader([1, 2, 3])
    worker_state = dict(make(shards).state_dict(), worker=0, num_workers=2, next=0)
    del worker_state["batches"]
    with pytest.raises(ConfigError, match="inside one DataLoader worker"):
        loader(shards, 2).load_state_dict(worker_state)
    with pytest.raises(ConfigError, match="saved state has seed=0, this loader has seed=4"):
        loader(shards, 2, seed=4).load_state_dict(loader(shards, 2).state_dict())


def test_a_training_loader_dropped_with_persistent_workers_lets_them_go_at_once(shards):
    """No reference cycle between the loader and its pass record: dropping the loader ends its persistent
    workers then (the cycle collector is off), its state still taken from the loader before that."""
    import gc  # noqa: PLC0415
    import multiprocessing  # noqa: PLC0415

    gc.collect()
    gc.disable()
    try:
        before = {p.pid for p in multiprocessing.active_children()}
        kept = TrainingLoader(make(shards), num_workers=2, persistent_workers=True, collate_fn=lambda b: b)
        it = iter(kept)
        next(it)
        assert kept.state_dict()["epoch"] == 0
        workers = {p.pid for p in multiprocessing.active_children()} - before
        assert len(workers) == 2
        del kept, it
        assert workers.isdisjoint(p.pid for p in multiprocessing.active_children())
    finally:
        gc.enable()
