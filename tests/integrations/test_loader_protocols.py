"""What frameworks ask of a loader, in one process: a state that restores (Lightning and torchdata call
``state_dict()`` on every loader that has one), ``len()`` where counts are known, and the placement a framework's
loader gives the dataset (Accelerate deals the data to the ranks itself)."""

from __future__ import annotations

import pickle

import pytest

torch = pytest.importorskip("torch")

import shardstream as wds
from shardstream.indexed import index_dataset
from shardstream.runtime import Placement, framework_split
from shardstream.testing import write_shards


def numbers(sample):
    return sample["cls"]


@pytest.fixture
def urls(tmp_path):
    write_shards(tmp_path, [15] * 6 + [10], {"cls": lambda shard, index, number: number})
    return str(tmp_path / "shard-{000000..000006}.tar")


def dataset(urls):
    return wds.WebDataset(urls, shardshuffle=True).decode().map(numbers)


@pytest.mark.parametrize("workers", [0, 2])
def test_webloader_state_restores_mid_epoch(urls, workers):
    loader = wds.WebLoader(dataset(urls), batch_size=8, num_workers=workers)
    loader.set_epoch(3)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(4)]
    state = loader.state_dict()
    rest = [b.tolist() for b in it]
    assert sorted(sum(head + rest, [])) == list(range(100))
    again = wds.WebLoader(dataset(urls), batch_size=8, num_workers=workers)
    again.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert [b.tolist() for b in again] == rest


def test_a_checkpoint_between_epochs_starts_the_next_one(urls):
    loader = wds.WebLoader(dataset(urls), batch_size=8, num_workers=2)
    first = [b.tolist() for b in loader]
    state = loader.state_dict()
    again = wds.WebLoader(dataset(urls), batch_size=8, num_workers=2)
    again.load_state_dict(state)
    assert again.epoch == loader.epoch == 1
    second = [b.tolist() for b in again]
    assert sorted(sum(second, [])) == list(range(100)) and second != first


def test_len_when_counts_are_known(urls):
    assert len(wds.WebLoader(dataset(urls).with_length(100), batch_size=8)) == 13
    assert len(wds.WebLoader(dataset(urls).batched(8).with_length(13), batch_size=None, num_workers=2)) == 13
    assert len(wds.WebLoader(dataset(urls), batch_size=8, num_workers=2).with_length(14)) == 14
    with pytest.raises(TypeError, match="with_length"):
        len(wds.WebLoader(dataset(urls), batch_size=8))
    with pytest.raises(TypeError, match="2 workers each end with a partial batch"):
        len(wds.WebLoader(dataset(urls).with_length(100), batch_size=8, num_workers=2))


def test_no_framework_outside_one():
    assert framework_split() is None and Placement.current().framework is None


def test_an_uneven_split_between_ranks_is_said(urls, caplog):
    from shardstream.pipeline.context import Context
    from shardstream.pipeline.stages.split import split_by_node

    ctx = Context(placement=Placement(rank=1, world_size=2))
    with caplog.at_level("WARNING", logger="shardstream"):
        assert list(split_by_node(range(7), ctx)) == [1, 3, 5]
    assert "7 shards do not split evenly between 2 ranks" in caplog.text and "TrainingLoader" in caplog.text
    caplog.clear()
    assert list(split_by_node(range(8), ctx)) == [1, 3, 5, 7] and caplog.text == ""


@pytest.mark.parametrize("length", ["declared", "indexed", "unknown"])
def test_lightning_checkpoints_and_resumes_a_webloader(urls, tmp_path, length):
    """The issue's crash: Lightning calls state_dict() on the WebLoader at every checkpoint (one device here; the
    two-process runs are in test_frameworks.py). Lightning reads one batch ahead from a loader without a length,
    so a checkpoint of such a loader is one batch ahead and the resumed run skips that batch. A WebLoader with a
    length resumes exactly: declared (.with_length, no workers), or known from the shards' sidecar indexes (with
    2 workers: each worker's batches), which is what Lightning counts its batches (and progress bar) with."""
    L = pytest.importorskip("lightning")
    if length == "indexed":
        index_dataset(sorted(str(p) for p in tmp_path.glob("shard-*.tar")), tmp_path / "index.json")
    workers = 0 if length == "declared" else 2
    trained: list[tuple[int, list[int]]] = []

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def training_step(self, batch, batch_idx):
            trained.append((self.current_epoch, batch.tolist()))
            return self.layer(batch.float().unsqueeze(1)).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def fit(resume=None):
        trained.clear()
        data = dataset(urls).with_length(100) if length == "declared" else dataset(urls)
        loader = wds.WebLoader(data, batch_size=8, num_workers=workers)
        checkpoints = L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="{step}",
                                                          every_n_train_steps=5, save_top_k=-1)
        trainer = L.Trainer(devices=1, accelerator="cpu", max_epochs=2, callbacks=[checkpoints], logger=False,
                            enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
        trainer.fit(Tiny(), loader, ckpt_path=resume)
        return list(trained), trainer.num_training_batches

    whole, batches = fit()
    for epoch in (0, 1):
        assert sorted(n for e, batch in whole if e == epoch for n in batch) == list(range(100))
    if length == "unknown":
        assert batches == float("inf")
    else:  # 13 batches of 8 with 0 workers; with 2 workers each ends its own: the count of this epoch's deal
        assert batches == sum(1 for e, _ in whole if e == 0) == sum(1 for e, _ in whole if e == 1)
    resumed, _ = fit(tmp_path / "ckpt" / "step=20.ckpt")  # mid-epoch 1
    ahead = 1 if length == "unknown" else 0  # Lightning's read-ahead (no length)
    assert resumed == whole[20 + ahead:]


def _accelerate_class(name):
    """A class that looks like one of Accelerate's loaders to framework_split (module and name)."""

    def __iter__(self):
        self.seen = (framework_split(), pickle.loads(pickle.dumps(self.dataset)))
        return iter(())

    def __len__(self):
        return len(self.dataset)

    return type(name, (), {"__module__": "accelerate.data_loader", "__iter__": __iter__, "__len__": __len__})


@pytest.mark.parametrize("name", ["DataLoaderDispatcher", "IterableDatasetShard"])
def test_under_an_accelerate_loader_every_rank_reads_everything(urls, name, monkeypatch, tmp_path):
    """The frame walk finds the Accelerate loader that iterates the dataset; a copy pickled for a spawned worker
    keeps the finding; the placement is then rank 0 of 1, so no shard is split away (Accelerate deals them), and
    the length Accelerate asks for is the whole dataset's."""
    monkeypatch.setenv("RANK", "1")  # settings are read from the environment at each call
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert Placement.current().world_size == 2
    loader = _accelerate_class(name)()
    loader.dataset = dataset(urls)
    iter(loader)
    found, copy = loader.seen
    assert found == "accelerate" and copy._framework == "accelerate"
    assert Placement.current(copy._framework).world_size == 1
    assert sorted(copy) == list(range(100))  # outside the loader, the copy still reads everything
    index_dataset(sorted(str(p) for p in tmp_path.glob("shard-*.tar")), tmp_path / "index.json")
    loader.dataset = dataset(urls)
    assert len(loader) == 100  # asked by Accelerate: the whole dataset's length (it divides it between the ranks)
    assert len(dataset(urls)) < 100  # asked directly on rank 1 of 2: its own shards' samples
    with pytest.raises(wds.UnevenSplitError, match="7 shards cannot be split evenly between 2 ranks"):
        list(dataset(urls))  # a plain iteration on rank 1 of 2 splits the 7 shards: refused, it would be uneven
    assert len(list(dataset(urls).with_epoch(30))) == 30  # its own shards, as many as the epoch says
