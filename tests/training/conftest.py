"""Fixtures of the training tests (the helpers are in training_data.py)."""

from __future__ import annotations

import pytest
from training_data import write_dataset


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """5 shards of 12, 12, 12, 12 and 11 samples (59: it divides by nothing useful, so padding shows)."""
    return write_dataset(tmp_path_factory.mktemp("training"), [12, 12, 12, 12, 11])


@pytest.fixture(scope="module")
def two_shards(tmp_path_factory):
    """2 shards of 20 samples: fewer shards than ranks x workers in the distributed tests."""
    return write_dataset(tmp_path_factory.mktemp("two"), [20, 20])
