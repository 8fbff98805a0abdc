"""shardstream split / reshard: N shards, count or size limits, never splitting a sample, stdin input."""

from __future__ import annotations

import io
import sys

import pytest
from cli_helpers import keys, members, run_cli

from shardstream.cli import main


def all_keys(paths) -> list[str]:
    return [k for p in paths for k in keys(p)]


def test_n_shards_round_robin(inputs):
    assert run_cli("split", "dataset.tar", "-n", "3", "-o", "p-%02d.tar") == 0
    parts = [keys(inputs / f"p-{i:02d}.tar") for i in range(3)]
    assert [len(p) for p in parts] == [7, 7, 6]
    assert parts[0][:3] == ["d000000", "d000003", "d000006"]
    assert sorted(all_keys(inputs / f"p-{i:02d}.tar" for i in range(3))) == keys("dataset.tar")


def test_more_shards_than_samples_gives_empty_valid_shards(inputs):
    assert run_cli("split", "a.tar", "-n", "8", "-o", "p-%02d.tar") == 0
    assert [len(keys(inputs / f"p-{i:02d}.tar")) for i in range(8)] == [1] * 6 + [0, 0]


def test_maxcount_keeps_the_order(inputs):
    assert run_cli("reshard", "shards-000000.tar", "shards-000001.tar", "shards-000002.tar", "--maxcount", "4",
                   "-o", "out/r-%03d.tar") == 0
    shards = sorted((inputs / "out").glob("r-*.tar"))
    assert [len(keys(s)) for s in shards] == [4, 4, 4, 3]
    assert all_keys(shards) == [f"s{i:06d}" for i in range(15)]


def test_maxsize_never_splits_a_sample(inputs):
    assert run_cli("split", "dataset.tar", "--maxsize", "20K", "-o", "z-%03d.tar") == 0
    shards = sorted(inputs.glob("z-*.tar"))
    assert len(shards) > 2 and all(s.stat().st_size <= 20 * 1024 for s in shards)
    got = [m for s in shards for m in members(s)]
    assert got == members("dataset.tar")


def test_stdin_input(inputs, monkeypatch):
    data = (inputs / "dataset.tar").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["split", "-", "--maxcount", "10", "-o", "s-%d.tar"]) == 0
    assert all_keys([inputs / "s-0.tar", inputs / "s-1.tar"]) == keys("dataset.tar")


def test_output_is_deterministic(inputs):
    assert run_cli("split", "dataset.tar", "-n", "2", "-o", "x-%d.tar") == 0
    assert run_cli("split", "dataset.tar", "-n", "2", "-o", "y-%d.tar") == 0
    for i in range(2):
        assert (inputs / f"x-{i}.tar").read_bytes() == (inputs / f"y-{i}.tar").read_bytes()


@pytest.mark.parametrize("args", [
    ["-o", "p-%d.tar"],  # no size
    ["-o", "p.tar", "-n", "2"],  # no pattern
    ["-o", "p-%d.tar", "-n", "2", "--maxsize", "1M"],
    ["-o", "p-%d.tar", "-n", "0"],
    ["-o", "p-%d.tar", "-n", "100000000"],  # more files than can be open
])
def test_usage_errors(inputs, capsys, args):
    assert run_cli("split", "dataset.tar", *args) == 2
    assert capsys.readouterr().err.startswith("shardstream: error: ")


def test_a_broken_input_leaves_no_partial_shard(inputs, capsys):
    data = (inputs / "dataset.tar").read_bytes()
    (inputs / "cut.tar").write_bytes(data[: len(data) // 2 + 100])
    assert run_cli("split", "cut.tar", "--maxcount", "100", "-o", "c-%d.tar") == 3
    assert "cut.tar" in capsys.readouterr().err
    assert not list(inputs.glob("c-*.tar")) and not list(inputs.glob(".c-*"))
