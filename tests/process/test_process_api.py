"""The public surface of shardstream.process and shardstream.convert is pinned: sorted, complete ``__all__``."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["shardstream.process", "shardstream.convert"])
def test_all_is_sorted_and_resolves(name):
    module = importlib.import_module(name)
    assert list(module.__all__) == sorted(module.__all__)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


def test_process_surface():
    from shardstream import process

    assert {"map_dataset", "run_tasks", "LocalEngine", "DaskEngine", "ShellCommand", "TarOutput"} <= set(process.__all__)
