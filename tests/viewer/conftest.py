"""Fixtures of the viewer tests: one generated dataset per session (see viewer_helpers.py), a running viewer."""

from __future__ import annotations

import pathlib

import pytest
from viewer_helpers import CHROMIUM, FLAGS, build_dataset, running


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The shards of the generated dataset (``classes.txt`` beside them)."""
    return build_dataset(pathlib.Path(tmp_path_factory.mktemp("viewer-data")))


@pytest.fixture(scope="session")
def server(dataset: list[str]):
    """A viewer of ``dataset`` on a free loopback port, for the whole session."""
    with running(dataset) as server:
        yield server


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, driven by Playwright, for the whole session."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:  # a test dependency: chromium is there, so this is an incomplete install
        raise RuntimeError("the browser tests need playwright: pip install 'shardstream[test]'") from e
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()
