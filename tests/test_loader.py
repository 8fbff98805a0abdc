"""torch DataLoader integration: exactly-once epochs across workers, WebLoader re-batching, collation."""

from __future__ import annotations

import re

import numpy as np
import pytest
from raising import raised

torch = pytest.importorskip("torch")

import shardstream as wds  # noqa: E402
from shardstream.errors import WorkerSplitError  # noqa: E402
from shardstream.testing import write_shards  # noqa: E402

ALL_KEYS = sorted(f"k{n}{i:02d}" for n in range(6) for i in range(10))


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """6 shards x 10 samples: keys k{shard}{i:02d}; .npy-free: txt and cls only, so decode is cheap."""
    root = tmp_path_factory.mktemp("loader")
    fields = {"txt": lambda shard, i, n: f"k{shard}{i:02d}", "cls": lambda shard, i, n: str(i)}
    write_shards(root, [10] * 6, fields, name="l-{shard}.tar", key="k{shard}{index:02d}")
    return str(root / "l-{0..5}.tar")


def test_two_workers_deliver_every_sample_exactly_once_per_epoch(shards):
    dataset = wds.WebDataset(shards, shardshuffle=True).shuffle(20).decode().to_tuple("txt", "cls")
    loader = torch.utils.data.DataLoader(dataset, num_workers=2, batch_size=None)
    epochs = [[key for key, _ in loader] for _ in range(2)]
    for keys in epochs:
        assert sorted(keys) == ALL_KEYS  # no duplicates across workers, nothing lost
    assert epochs[0] != epochs[1]  # a new order every epoch, even without set_epoch


def test_webloader_rebatches_across_workers_and_epochs_are_reproducible(shards):
    dataset = wds.WebDataset(shards, shardshuffle=True, seed=5).decode().to_tuple("txt", "cls").batched(4)
    loader = wds.WebLoader(dataset, num_workers=2, batch_size=None).unbatched().shuffle(16).batched(7)
    assert loader.dataset is dataset
    runs = []
    for epoch in (0, 1, 0):
        loader.set_epoch(epoch)
        batches = list(loader)
        assert all(isinstance(b[1], torch.Tensor) for b in batches)  # the DataLoader converted numpy arrays
        assert [len(b[0]) for b in batches] == [7] * 8 + [4]
        runs.append([k for b in batches for k in b[0]])
    assert sorted(runs[0]) == ALL_KEYS and runs[0] == runs[2] != runs[1]


def test_too_many_workers_is_a_clear_error_not_a_hang(tmp_path):
    (url,) = write_shards(tmp_path, [1], {"txt": "x"}, name="one.tar", key="a")
    loader = torch.utils.data.DataLoader(wds.WebDataset(url), num_workers=2, batch_size=None)
    error = raised(WorkerSplitError, loader)
    assert re.search(r"worker 1 of 2 received no shard.*num_workers=1", str(error))


def test_loader_with_epoch_and_default_collate(shards):
    dataset = wds.WebDataset(shards, resampled=True).decode().to_tuple("txt", "cls")
    loader = wds.WebLoader(dataset, num_workers=0, batch_size=8).with_epoch(5)
    batches = list(loader)
    assert len(batches) == 5 and batches[0][1].shape == (8,)


def test_collation_with_tensors_in_the_pipeline(shards):
    ds = (wds.WebDataset(shards).decode().to_tuple("txt", "cls")
          .map_tuple(None, lambda c: torch.full((2,), c)).batched(5))
    keys, labels = next(iter(ds))
    assert isinstance(labels, torch.Tensor) and labels.shape == (5, 2) and len(keys) == 5
    assert isinstance(wds.default_collation_fn([(np.zeros(1),)])[0], np.ndarray)


@pytest.fixture
def no_collector():
    """The cycle collector off: what is freed here is freed by reference counting alone."""
    import gc  # noqa: PLC0415

    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_loader_dropped_mid_epoch_lets_its_workers_go_at_once(shards, no_collector):
    """No reference cycle holds a loader and its iteration: dropping them mid-epoch ends the DataLoader workers
    then, not when the garbage collector runs (and torch's iterator, collected in a cycle, waits 5 s per worker)."""
    import multiprocessing  # noqa: PLC0415
    import weakref  # noqa: PLC0415

    before = {p.pid for p in multiprocessing.active_children()}
    loader = wds.WebLoader(wds.WebDataset(shards, shardshuffle=False).to_tuple("txt"), num_workers=2, batch_size=2)
    it = iter(loader)
    next(it)
    workers = {p.pid for p in multiprocessing.active_children()} - before
    assert len(workers) == 2
    gone = weakref.ref(loader)
    del loader, it
    assert gone() is None
    assert workers.isdisjoint(p.pid for p in multiprocessing.active_children())


def test_a_dataset_dropped_mid_epoch_is_freed_at_once(shards, no_collector):
    import weakref  # noqa: PLC0415

    dataset = wds.WebDataset(shards, shardshuffle=False).decode().to_tuple("txt", "cls").batched(4)
    it = iter(dataset)
    next(it)
    gone = weakref.ref(dataset)
    del dataset, it
    assert gone() is None
