"""shardstream.testing.assert_checkpoint_conformance over every stateful stage, both training modes, the loaders
and torchdata's StatefulDataLoader: save at many points, restore into a fresh object, compare the rest."""

from __future__ import annotations

import pytest
from training_data import write_dataset

import shardstream as wds
from shardstream.pipeline import (
    DataPipeline,
    SimpleShardList,
    batched,
    check_empty,
    decode,
    detshuffle,
    listed,
    map,
    repeat,
    rsample,
    select,
    shuffle,
    slice,
    split_by_node,
    tarfile_to_samples,
    to_tuple,
    unbatched,
    unlisted,
    with_epoch,
)
from shardstream.testing import assert_checkpoint_conformance
from shardstream.training import TrainingDataset

STAGES = {
    "shuffle": lambda: [shuffle(7)],
    "shuffle-initial": lambda: [shuffle(50, initial=3, seed=4)],
    "detshuffle": lambda: [detshuffle(6, seed=2, epoch=3)],
    "batched": lambda: [batched(4, collation_fn=None)],
    "batched-collated": lambda: [map(lambda x: {"x": x}), batched(5)],
    "unbatched": lambda: [map(lambda x: {"x": x}), batched(4), unbatched()],
    "listed+unlisted": lambda: [listed(3), shuffle(3), unlisted()],
    "slice": lambda: [slice(2, 20, 3)],
    "slice-stop": lambda: [slice(7)],
    "rsample": lambda: [rsample(0.6)],
    "map+select": lambda: [map(lambda x: x * 2), select(lambda x: x % 3 != 0)],
    "with_epoch": lambda: [shuffle(5), with_epoch(50)],
    "repeat": lambda: [shuffle(5), repeat(3)],
    "check_empty": lambda: [check_empty()],
}


@pytest.mark.parametrize("name", sorted(STAGES))
def test_every_stateful_stage(name):
    assert_checkpoint_conformance(lambda: DataPipeline(range(23), *STAGES[name]()))


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("conformance"), [9, 9, 9, 5])


def webdataset(urls):
    return (wds.WebDataset(urls, shardshuffle=True, seed=3).shuffle(12).decode()
            .rename(n="cls").to_tuple("__key__", "n").batched(4))


def test_webdataset_reader_shard_shuffle_and_sample_shuffle(urls):
    assert_checkpoint_conformance(lambda: webdataset(urls))


def test_reader_with_a_skipping_handler_and_resampled_epochs(urls, tmp_path):
    broken = tmp_path / "broken.tar"
    broken.write_bytes(open(urls[0], "rb").read()[:3000])  # truncated: its first samples, then an error
    with_broken = [urls[1], str(broken), urls[2]]
    assert_checkpoint_conformance(
        lambda: wds.WebDataset(with_broken, handler=wds.warn_and_continue).shuffle(5).to_tuple("__key__"))
    assert_checkpoint_conformance(lambda: wds.WebDataset(urls, resampled=True, seed=1).shuffle(6).with_epoch(25))


def test_samples_split_between_ranks_after_the_reader(urls, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    make = lambda: DataPipeline(SimpleShardList(urls), tarfile_to_samples(), split_by_node, shuffle(4),  # noqa: E731
                                decode(), to_tuple("cls"))
    items = assert_checkpoint_conformance(make)
    assert len(items) == 16


@pytest.mark.parametrize("shuffle_mode", ["global", "window", "stream", "none"])
def test_training_dataset_both_modes(urls, shuffle_mode):
    assert_checkpoint_conformance(
        lambda: TrainingDataset(urls, batch_size=5, shuffle=shuffle_mode, window=2, buffer=7, decode=True, seed=9))


@pytest.mark.parametrize("shuffle_mode", ["global", "stream"])
def test_training_loader_with_workers(urls, shuffle_mode):
    pytest.importorskip("torch")
    from shardstream.training import TrainingLoader

    def make():
        return TrainingLoader(TrainingDataset(urls, batch_size=4, shuffle=shuffle_mode, buffer=7, decode=True),
                              num_workers=2)

    assert_checkpoint_conformance(make, points=[0, 3, 8])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("what", ["training", "stream", "webdataset"])
def test_torchdata_stateful_dataloader(urls, what, workers):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def make():
        if what == "webdataset":
            dataset = webdataset(urls)
        else:
            dataset = TrainingDataset(urls, batch_size=4, decode=True, shuffle="global" if what == "training" else what)
        return stateful.StatefulDataLoader(dataset, batch_size=None, num_workers=workers)

    # without workers the dataset object itself moves on to the next epoch, so later epochs are compared too;
    # with workers they get copies (call set_epoch, as with any DataLoader)
    assert_checkpoint_conformance(make, points=[0, 2, 7, 8] if workers == 0 else [0, 2, 7], epochs=2 - bool(workers))


def test_webloader_resumes_with_stateful_workers_or_none(urls):
    pytest.importorskip("torchdata")
    assert_checkpoint_conformance(
        lambda: wds.WebLoader(webdataset(urls), batch_size=None, num_workers=2, stateful=True).map(len),
        points=[0, 3], epochs=1)
    assert_checkpoint_conformance(lambda: wds.WebLoader(webdataset(urls), batch_size=None, num_workers=0)
                                  .unbatched().batched(3, collation_fn=None))


def test_a_pipeline_as_the_source_of_another(urls):
    # the inner pipeline's iterator is a cursor: restored in place, so a shuffle after it can save its buffer
    assert_checkpoint_conformance(lambda: DataPipeline(wds.WebDataset(urls, shardshuffle=True).to_tuple("__key__"),
                                                       shuffle(5), batched(3, collation_fn=None)))


def test_the_helper_catches_a_resume_that_repeats_an_item():
    class OffByOne(DataPipeline):
        def load_state_dict(self, state):
            chain = state["chain"]
            if chain is not None and chain["items"] > 0:
                state = dict(state, chain={"items": chain["items"] - 1})
            super().load_state_dict(state)

    with pytest.raises(AssertionError, match="before item 1: item 0 differs: 1 != 0"):
        assert_checkpoint_conformance(lambda: OffByOne(range(5)))
