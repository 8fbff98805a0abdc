"""shardstream cache: list and clear the shard cache through shardstream.io.cache."""

from __future__ import annotations

import json
import os

from shardstream.cli import main


def test_list(inputs, capsys):
    assert main(["cache", "list", "--cache-dir", "shard-cache"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("http_host_a.0123456789abcdef.tar")  # least recently used first
    assert out[-1] == "2 shards, 4.9 KiB in shard-cache"
    assert main(["cache", "list", "--cache-dir", "shard-cache", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["bytes"] == 5000 and [s["bytes"] for s in listing["shards"]] == [3000, 2000]


def test_clear_to_a_size_then_all(inputs, capsys):
    assert main(["cache", "clear", "--cache-dir", "shard-cache", "--max-size", "2500"]) == 0
    assert [n for n in os.listdir("shard-cache") if not n.startswith(".")] == ["http_host_b.fedcba9876543210.tar"]
    assert "removed 1 cached shard" in capsys.readouterr().err
    assert main(["cache", "clear", "--cache-dir", "shard-cache"]) == 0
    assert [n for n in os.listdir("shard-cache") if not n.startswith(".")] == []


def test_directory_from_the_environment(inputs, capsys, monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_CACHE_DIR", "shard-cache")
    assert main(["cache", "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["shards"]) == 2
    monkeypatch.delenv("SHARDSTREAM_CACHE_DIR")
    assert main(["cache", "list"]) == 2
    assert "SHARDSTREAM_CACHE_DIR" in capsys.readouterr().err


def test_empty_or_missing_cache(inputs, capsys):
    assert main(["cache", "list", "--cache-dir", "no-such-dir"]) == 0
    assert "0 shards" in capsys.readouterr().out
    assert main(["cache", "clear", "--cache-dir", "no-such-dir"]) == 0
    assert main(["cache", "list", "--cache-dir", "x", "--max-size", "1K"]) == 2
