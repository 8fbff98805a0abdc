"""TrainingLoader's states and epochs, pinned from the loader before it became a ``Resumable`` (issue 27).

The literal states below were saved by that loader: they must keep loading, continue with the same samples, and
the loader must save the same states at the same points (fresh, mid-pass, after a ``break``, after the pass, after
``set_epoch`` and ``load_state_dict``).
"""

from __future__ import annotations

import copy
import weakref

import pytest
from training_data import keys_of

pytest.importorskip("torch")

from shardstream.resume import Resumable  # noqa: E402
from shardstream.training import TrainingDataset, TrainingLoader  # noqa: E402

FINGERPRINT = {"seed": 3, "shuffle": "global", "drop_last": False, "window": None, "buffer": None, "samples": 59,
               "shards": 5, "lengths": "b66b69faa9794726"}


def saved(epoch: int, batches: int, world_size: int = 1, num_workers: int = 1) -> dict:
    """A rank state as the loader saved it (a literal of the format: nothing here is computed by shardstream)."""
    return {"format": "shardstream.state", "version": 2, "kind": "training", "fingerprint": dict(FINGERPRINT),
            "epoch": epoch, "plan": {"origin": [[0, 59]], "world_size": world_size, "batch_size": 4,
                                     "num_workers": num_workers, "skip": 0}, "batches": batches}


#: epoch 0 of seed 3: its first three batches, and the rest after a state saved there
HEAD = [48, 56, 30, 40, 42, 50, 37, 16, 11, 0, 32, 3]
REST = [49, 21, 46, 38, 19, 47, 5, 36, 18, 31, 34, 24, 52, 23, 17, 55, 13, 27, 33, 25, 51, 10, 14, 6, 9, 28, 8, 2, 7,
        41, 58, 4, 39, 15, 1, 43, 35, 53, 44, 20, 45, 22, 12, 54, 29, 57, 26]
#: epoch 2 after three batches on each of two ranks with two workers each, continued on one rank
ELASTIC = [32, 29, 41, 6, 11, 5, 45, 13, 36, 23, 31, 48, 54, 9, 12, 14, 10, 37, 34, 42, 0, 35, 3, 27, 22, 49, 44, 21,
           28, 53, 17, 52, 18, 56, 8]


def make(shards):
    return TrainingLoader(TrainingDataset(shards, batch_size=4, seed=3, collate=None), num_workers=0,
                          collate_fn=lambda batch: batch)


def test_a_saved_state_loads_and_continues(shards):
    loader = make(shards)
    loader.load_state_dict(saved(0, 3))
    assert (loader.epoch, len(loader), loader.state_dict()) == (0, 12, saved(0, 3))
    assert keys_of(list(loader)) == REST and loader.epoch == 1
    elastic = make(shards)
    elastic.load_state_dict(saved(2, 3, world_size=2, num_workers=2))
    assert len(elastic) == 9 and keys_of(list(elastic)) == ELASTIC
    assert elastic.state_dict() == saved(3, 0)


def test_the_states_saved_along_a_pass(shards):
    loader = make(shards)
    assert (loader.state_dict(), loader.epoch, len(loader)) == (saved(0, 0), 0, 15)
    it = iter(loader)
    assert loader.epoch == 1 and loader.state_dict() == saved(0, 0)  # the next iter() serves epoch 1 already
    assert keys_of([next(it) for _ in range(3)]) == HEAD
    assert loader.state_dict() == saved(0, 3)
    del it  # a break: the pass is gone (its workers with it), its position stays
    assert loader.state_dict() == saved(0, 3) and len(loader) == 15
    loader.set_epoch(5)  # the pass's position stays the state until the next iter()
    assert (loader.state_dict(), loader.epoch, len(loader)) == (saved(0, 3), 5, 15)
    assert len(keys_of(list(loader))) == 59
    assert (loader.state_dict(), loader.epoch) == (saved(6, 0), 6)


def test_every_batch_taken_is_the_start_of_the_next_epoch(shards):
    loader = make(shards)
    it = iter(loader)
    for _ in range(15):
        next(it)
    assert loader.state_dict() == saved(1, 0)


def test_set_epoch_keeps_a_loaded_state_of_its_epoch_only(shards):
    loader = make(shards)
    loader.load_state_dict(copy.deepcopy(saved(0, 3)))
    loader.set_epoch(0)
    assert loader.state_dict() == saved(0, 3)
    loader.set_epoch(1)
    assert loader.state_dict() == saved(1, 0) and len(loader) == 15


def test_the_loader_is_a_resumable(shards):
    assert isinstance(make(shards), Resumable)


def test_a_dropped_pass_is_not_kept_by_the_loader(shards):
    """After a ``break`` the loader keeps the pass's position, not the pass (nor its DataLoader workers)."""
    loader = make(shards)
    it = iter(loader)
    next(it)
    gone = weakref.ref(it)
    del it
    assert gone() is None and loader.state_dict() == saved(0, 1)
