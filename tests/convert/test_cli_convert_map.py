"""``shardstream convert`` and ``shardstream map``: the --help examples run, the shell opt-in, exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from convert_helpers import image_bytes

from shardstream.cli import build_parser, main
from shardstream.testing import write_shards


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """The files the --help examples name: images/, samples.jsonl, shards-00000{0..3}.tar, dataset.tar and
    transforms.py (a module with a function for --function)."""
    for i in range(6):
        folder = tmp_path / "images" / ("cat" if i < 3 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i}.jpg").write_bytes(image_bytes(i))
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps({"txt": f"caption {i}", "cls": i}) + "\n"
                                                    for i in range(10)))
    fields = {"txt": lambda shard, index, i: f"text {i}", "json": lambda shard, index, i: {"i": i}}
    write_shards(tmp_path, [5] * 4, fields, name="shards-{shard:06d}.tar", key="k{number:03d}")
    write_shards(tmp_path, [5], fields, name="dataset.tar", key="d{number}")
    (tmp_path / "transforms.py").write_text(
        "def drop_json(sample):\n    return {k: v for k, v in sample.items() if k != 'json'}\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def help_examples(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    return re.findall(r"^  \$ (.+)$", capsys.readouterr().out, re.MULTILINE)


@pytest.mark.parametrize("command", ["convert", "map"])
def test_help_examples_run(command, inputs, capsys):
    examples = help_examples(command, capsys)
    assert len(examples) >= 2
    for example in examples:
        r = subprocess.run(example.replace("shardstream ", f"{sys.executable} -m shardstream ", 1), shell=True,
                           cwd=inputs, capture_output=True)  # fmt: skip
        assert r.returncode == 0, f"`{example}`: {r.stderr.decode()}"


def test_shell_without_allow_shell_is_a_usage_error(inputs, capsys):
    assert main(["map", "dataset.tar", "out/", "--shell", "cat sample.txt"]) == 2
    assert "--allow-shell" in capsys.readouterr().err
    assert not os.path.exists("out")


def test_convert_reports_skips_and_resumes(inputs, capsys):
    (inputs / "rows.jsonl").write_text('{"image_path": "images/cat/0.jpg"}\n{"image_path": "gone.jpg"}\n')
    assert main(["convert", "rows.jsonl", "rows/", "--engine", "inline", "--report", "report.json"]) == 0
    err = capsys.readouterr().err
    assert "1 samples" in err and "1 record skipped" in err and "gone.jpg" in err
    assert json.loads((inputs / "report.json").read_text())["skipped"][0]["key"] == "rows-00000001"
    assert main(["convert", "rows.jsonl", "rows/", "--engine", "inline"]) == 0
    assert "(1 already complete)" in capsys.readouterr().err


def test_the_report_is_never_written_through_a_symbolic_link(inputs):
    (inputs / "rows.jsonl").write_text('{"txt": "a"}\n')
    (inputs / "report.json").symlink_to(inputs / "outside.json")  # dangling
    assert main(["convert", "rows.jsonl", "rows/", "--engine", "inline", "--report", "report.json"]) == 0
    assert not (inputs / "outside.json").exists() and not (inputs / "report.json").is_symlink()
    assert json.loads((inputs / "report.json").read_text()) == {"skipped": [], "failures": []}


def test_a_failing_function_exits_3_and_names_the_task(inputs, capsys):
    (inputs / "bad.py").write_text("def boom(sample):\n    raise ValueError('no good')\n")
    assert main(["map", "dataset.tar", "out/", "--function", "bad:boom", "--engine", "inline", "--retries", "0"]) == 3
    err = capsys.readouterr().err
    assert "1 of 1 tasks failed" in err and "ValueError: no good" in err and "dataset.tar" in err


def test_bad_function_spec_is_a_usage_error(inputs, capsys):
    assert main(["map", "dataset.tar", "out/", "--function", "nomodule"]) == 2
    assert "MODULE:NAME" in capsys.readouterr().err
