"""shardstream ls / info: samples, extensions, sizes, histogram; text and --json."""

from __future__ import annotations

import json

from cli_helpers import write_tar

from shardstream.cli import main


def test_ls_lines_and_json(inputs, capsys):
    assert main(["ls", "a.tar"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and lines[0].startswith("a000000\t") and "png:" in lines[0] and "cls:1" in lines[0]
    assert main(["ls", "a.tar", "b.tar", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 12 and rows[6]["url"] == "b.tar" and rows[6]["key"] == "b000000"
    assert set(rows[0]["fields"]) == {"cls", "json", "png", "txt"}


def test_info_json_numbers(inputs, capsys):
    write_tar(inputs / "sizes.tar", [
        {"__key__": "a", "txt": "x" * 10, "cls": "1"},
        {"__key__": "b", "txt": "x" * 100},
        {"__key__": "c", "txt": "x" * 1000, "JPG": b"\xff" * 5},
    ])
    assert main(["info", "sizes.tar", "a.tar", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [s["samples"] for s in info["shards"]] == [3, 6]
    assert info["samples"] == 9
    assert info["extensions"]["txt"]["count"] == 9 and info["extensions"]["txt"]["max"] == 1000
    assert info["extensions"]["jpg"] == {"count": 1, "bytes": 5, "min": 5, "max": 5}  # lower-cased as read
    assert sum(h["count"] for h in info["sample_size_histogram"]) == 9
    assert info["first_key"] == "a" and info["last_key"] == "a000005"
    assert info["bytes"] == sum(e["bytes"] for e in info["extensions"].values())


def test_info_text(inputs, capsys):
    write_tar(inputs / "partial.tar", [{"__key__": "a", "txt": "x", "cls": "1"}, {"__key__": "b", "txt": "y"}])
    assert main(["info", "dataset.tar", "partial.tar"]) == 0
    out = capsys.readouterr().out
    assert "samples:  22" in out and "shards:   2" in out
    assert "png" in out and "missing in some samples: cls (1)" in out
    assert "sample size" in out and "#" in out


def test_info_of_an_empty_shard(inputs, capsys):
    write_tar(inputs / "empty.tar", [])
    assert main(["info", "empty.tar"]) == 0
    assert "samples:  0" in capsys.readouterr().out


def test_info_through_pipe_and_key_rule(inputs, capsys):
    write_tar(inputs / "dots.tar", [{"__key__": "song 2.0 (live)", "mp3": b"ID3", "json": "{}"}])
    assert main(["info", "pipe:cat dots.tar", "--key-rule", "last-dot", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["samples"] == 1 and set(info["extensions"]) == {"mp3", "json"}
    assert main(["info", "dots.tar", "--json"]) == 0  # WebDataset's rule cuts at the first dot
    assert set(json.loads(capsys.readouterr().out)["extensions"]) == {"0 (live).mp3", "0 (live).json"}
