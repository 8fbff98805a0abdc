"""Fixtures of the CLI tests (helpers in cli_helpers.py)."""

from __future__ import annotations

import pathlib
import shutil

import pytest
from cli_helpers import build_inputs


@pytest.fixture(scope="session")
def _template(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("cli-inputs")
    build_inputs(root)
    return root


@pytest.fixture
def inputs(_template: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A fresh copy of the inputs; the current directory is set to it."""
    root = tmp_path / "work"
    shutil.copytree(_template, root)
    monkeypatch.chdir(root)
    return root
