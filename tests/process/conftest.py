"""Fixtures of the processing tests (helpers in process_helpers.py)."""

from __future__ import annotations

import pathlib

import pytest
from process_helpers import make_shards


@pytest.fixture
def shards(tmp_path: pathlib.Path) -> list[str]:
    """Four shards of 25 samples (keys s00000..s00099, fields txt and cls)."""
    return make_shards(tmp_path)
