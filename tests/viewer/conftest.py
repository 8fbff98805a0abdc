"""Fixtures of the viewer tests: one generated dataset per session (see viewer_helpers.py), a running viewer."""

from __future__ import annotations

import pathlib

import pytest
from viewer_helpers import build_dataset, running


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The shards of the generated dataset (``classes.txt`` beside them)."""
    return build_dataset(pathlib.Path(tmp_path_factory.mktemp("viewer-data")))


@pytest.fixture(scope="session")
def server(dataset: list[str]):
    """A viewer of ``dataset`` on a free loopback port, for the whole session."""
    with running(dataset) as server:
        yield server
