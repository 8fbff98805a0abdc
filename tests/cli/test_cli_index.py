"""shardstream index: sidecar indexes, the dataset index and DALI .idx files, through shardstream.indexed."""

from __future__ import annotations

import gzip
import json
import os

from cli_helpers import run_cli

from shardstream.cli import main
from shardstream.indexed import IndexedDataset, ShardIndex


def test_sidecars_are_built_then_kept(inputs, capsys):
    assert main(["index", "a.tar", "b.tar"]) == 0
    assert "2 built, 0 already fresh" in capsys.readouterr().err
    assert ShardIndex.load("a.tar").keys() == [f"a{i:06d}" for i in range(6)]
    assert main(["index", "a.tar", "b.tar"]) == 0
    assert "0 built, 2 already fresh" in capsys.readouterr().err
    assert main(["index", "a.tar", "--overwrite"]) == 0
    assert "1 built" in capsys.readouterr().err
    (inputs / "a.tar").write_bytes((inputs / "b.tar").read_bytes())  # the shard changed: rebuilt
    assert main(["index", "a.tar"]) == 0
    assert "1 built" in capsys.readouterr().err and ShardIndex.load("a.tar").keys()[0] == "b000000"


def test_dataset_index_opens_as_an_indexed_dataset(inputs):
    shards = [f"shards-{i:06d}.tar" for i in range(4)]
    assert run_cli("index", *shards, "-o", "train.json") == 0
    assert json.loads((inputs / "train.json").read_text())["samples"] == 20
    ds = IndexedDataset("train.json")
    assert len(ds) == 20 and ds[7]["__key__"] == "s000007"


def test_dali_index_files(inputs):
    assert run_cli("index", "a.tar", "--dali") == 0
    lines = (inputs / "a.idx").read_text().splitlines()
    assert lines[0] == "v1.2 6" and lines[1].startswith("cls 512 1 a000000.cls ")


def test_refusals(inputs, capsys):
    (inputs / "a.tar.gz").write_bytes(gzip.compress((inputs / "a.tar").read_bytes()))
    assert main(["index", "a.tar.gz"]) == 2
    assert "compressed" in capsys.readouterr().err
    assert main(["index", "pipe:cat a.tar"]) == 2
    assert "local" in capsys.readouterr().err
    assert main(["index", "missing.tar"]) == 3
    assert not os.path.exists("missing.tar.ssidx")
