"""Issue 18, item 1: a URL written inside a file never runs a command without the explicit opt-in.

Each test plants ``pipe:`` URLs that would create a marker file into a dataset index (or a recipe, or JSON
Lines) and reads it through one public entry point: the command must not run (marker absent, typed
:class:`UnsafeURLError` naming the file, the URL and the opt-in), and it does run with ``allow_commands=True`` /
``--allow-commands``. URLs given directly in code keep running as webdataset users expect.
"""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

import pytest

import shardstream
from shardstream import WebDataset
from shardstream.cli import main
from shardstream.errors import ConfigError, UnsafeURLError
from shardstream.indexed import DatasetIndex, IndexedDataset, index_dataset
from shardstream.io import trust
from shardstream.testing import write_shards
from shardstream.training import TrainingDataset
from shardstream.viewer import ViewerData

SRC = pathlib.Path(shardstream.__file__).parent


@pytest.fixture
def planted(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    """``(index json path, marker path)``: a dataset index whose first shard is ``pipe:touch MARKER; cat shard``."""
    monkeypatch.chdir(tmp_path)
    fields = {"txt": lambda shard, index, i: f"text {i}", "cls": lambda shard, index, i: i}
    shards = write_shards(tmp_path, [3, 3], fields, name="ds-{shard:03d}.tar", key="s{number}", index=True)
    index_path = tmp_path / "ds.json"
    index_dataset(shards, index_path)
    marker = tmp_path / "MARKER"
    doc = json.loads(index_path.read_text())
    first = doc["shards"][0]
    first["url"] = f"pipe:touch {marker}; cat {tmp_path / first['url']}"
    first["index"] = str(tmp_path / first["index"])
    index_path.write_text(json.dumps(doc))
    return index_path, marker


def _refused(excinfo: pytest.ExceptionInfo, index_path: pathlib.Path) -> None:
    error = excinfo.value
    assert isinstance(error, UnsafeURLError) and isinstance(error, ConfigError)
    assert error.url.startswith("pipe:touch") and error.document == str(index_path)
    assert "allow_commands=True" in str(error) and "--allow-commands" in str(error)


def test_dataset_index_load_refuses_commands(planted):
    index_path, marker = planted
    with pytest.raises(UnsafeURLError) as excinfo:
        DatasetIndex.load(index_path)
    _refused(excinfo, index_path)
    assert not marker.exists()
    assert DatasetIndex.load(index_path, allow_commands=True).shards[0].url.startswith("pipe:")


@pytest.mark.parametrize("shuffle", ["stream", "global", "window", "none"])
def test_training_dataset_refuses_commands_from_an_index(planted, shuffle):
    index_path, marker = planted
    with pytest.raises(UnsafeURLError) as excinfo:
        ds = TrainingDataset(str(index_path), batch_size=2, shuffle=shuffle, collate=None)
        list(ds)
    _refused(excinfo, index_path)
    assert not marker.exists()


def test_training_dataset_runs_commands_with_the_opt_in(planted):
    index_path, marker = planted
    ds = TrainingDataset(str(index_path), batch_size=2, shuffle="stream", collate=None, allow_commands=True)
    keys = sorted(sample["__key__"] for batch in ds for sample in batch)
    assert keys == [f"s{i}" for i in range(6)]
    assert marker.exists()


def test_indexed_dataset_refuses_commands_from_an_index(planted):
    index_path, marker = planted
    with pytest.raises(UnsafeURLError) as excinfo:
        IndexedDataset(str(index_path))
    _refused(excinfo, index_path)
    assert not marker.exists()


def test_an_index_file_named_by_a_command_is_refused_too(planted):
    index_path, marker = planted
    doc = json.loads(index_path.read_text())
    doc["shards"][0]["url"] = str(index_path.parent / "ds-000.tar")
    doc["shards"][0]["index"] = f"pipe:touch {marker}"
    index_path.write_text(json.dumps(doc))
    with pytest.raises(UnsafeURLError):
        DatasetIndex.load(index_path)


def test_viewer_refuses_commands_from_an_index(planted):
    index_path, marker = planted
    with pytest.raises(UnsafeURLError) as excinfo:
        ViewerData([str(index_path)])
    _refused(excinfo, index_path)
    assert not marker.exists()


def test_cli_view_refuses_commands_from_an_index(planted, capsys):
    index_path, marker = planted
    assert main(["view", str(index_path), "--check"]) != 0
    err = capsys.readouterr().err
    assert "pipe:touch" in err and "--allow-commands" in err
    assert not marker.exists()


def test_cli_view_runs_commands_with_the_opt_in(planted, capsys, tmp_path):
    index_path, marker = planted
    assert main(["view", str(index_path), "--check", "--allow-commands", "--cache-dir", str(tmp_path / "c")]) == 0
    assert marker.exists()
    assert " ok: " in capsys.readouterr().out


@pytest.mark.parametrize("command", ["info", "cat", "verify", "index"])
def test_other_commands_never_run_what_an_index_names(planted, command, capsys):
    index_path, marker = planted
    main([command, str(index_path)])
    assert not marker.exists()


def test_cli_create_recipe_and_jsonl_go_through_the_same_check(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    (tmp_path / "recipe.txt").write_text(f"a.txt pipe:touch {marker}; echo hi\n")
    (tmp_path / "s.jsonl").write_text(json.dumps({"txt.path": f"pipe:touch {marker}; echo hi"}) + "\n")
    for source in ("recipe.txt", "s.jsonl"):
        assert main(["create", source, "-o", "out.tar"]) == 2
        assert "--allow-commands" in capsys.readouterr().err
        assert not marker.exists()
    assert main(["create", "recipe.txt", "--allow-commands", "-o", "out.tar"]) == 0
    assert marker.exists()


def test_urls_given_in_code_stay_trusted(planted, tmp_path):
    index_path, marker = planted
    shard = tmp_path / "ds-001.tar"
    keys = [s["__key__"] for s in WebDataset(f"pipe:touch {marker}; cat {shard}", shardshuffle=False,
                                              nodesplitter=None, workersplitter=None)]
    assert keys == ["s3", "s4", "s5"] and marker.exists()


def test_a_rewrite_rule_to_pipe_makes_document_urls_commands(monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_URL_REWRITES", "gs://=pipe:./fetch-gs.sh?")
    assert trust.runs_command("gs://bucket/a.tar")
    with pytest.raises(UnsafeURLError):
        trust.urls_from_document(["gs://bucket/a.tar; rm -rf ~"], document="ds.json")


@pytest.mark.parametrize("command", ["pipe:touch x", "PIPE:touch x", "Pipe:touch x"])
def test_one_command_among_many_urls_is_found_and_named(command):
    """The list is checked by one scan of its text: a command anywhere in it, in any case, is still refused, and
    the error names that URL."""
    urls = [f"s3://bucket/train-{i:06d}.tar" for i in range(10_000)]
    urls[7_345] = command
    with pytest.raises(UnsafeURLError) as raised:
        trust.urls_from_document(urls, document="big.json")
    assert command in str(raised.value)
    assert trust.urls_from_document(urls, document="big.json", allow_commands=True)[7_345] == command


def test_a_url_holding_a_line_break_is_judged_by_its_scheme_alone():
    """A line break then ``pipe:`` inside a URL looks like a command to the scan; the exact check lets it be."""
    urls = ["s3://b/a.tar", "data/odd\npipe:name.tar", "/data/pipe:x.tar"]
    assert trust.urls_from_document(urls, document="ds.json") == urls


def test_a_rewrite_rule_to_pipe_is_found_among_many_urls(monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_URL_REWRITES", "gs://=pipe:./fetch-gs.sh?")
    urls = [f"s3://bucket/train-{i:06d}.tar" for i in range(1_000)] + ["gs://bucket/last.tar"]
    with pytest.raises(UnsafeURLError, match="gs://bucket/last.tar"):
        trust.urls_from_document(urls, document="ds.json")


def test_every_document_reader_goes_through_the_one_check(planted, monkeypatch):
    """Count the calls of the check from each entry point that reads URLs out of a file."""
    index_path, _ = planted
    calls = []
    real = trust.urls_from_document

    def counting(urls, *, document, allow_commands=False):
        calls.append(str(document))
        return real(urls, document=document, allow_commands=allow_commands)

    monkeypatch.setattr(trust, "urls_from_document", counting)
    import shardstream.indexed.dataset_index as dataset_index

    monkeypatch.setattr(dataset_index, "urls_from_document", counting)
    for entry in (lambda: DatasetIndex.load(index_path), lambda: IndexedDataset(str(index_path)),
                  lambda: TrainingDataset(str(index_path), batch_size=2, shuffle="stream"),
                  lambda: ViewerData([str(index_path)])):
        calls.clear()
        with pytest.raises(UnsafeURLError):
            entry()
        assert calls == [str(index_path)]


def test_no_second_command_check_in_the_package():
    """The scheme that runs commands is named only by the opener registry, the pipe opener, the writer's pipe
    target and trust.py: no reader compares schemes to 'pipe' on its own."""
    allowed = {"io/registry.py", "io/pipe.py", "io/remote_write.py", "io/trust.py",
               "cache.py",  # webdataset's pipe_cleaner: takes the URL out of a "pipe:curl URL" text, runs nothing
               "gopen.py"}  # webdataset's gopen_schemes table: opens the caller's own pipe: URL through open_url
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in ("pipe", "pipe:") and rel not in allowed:
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []


def test_a_subprocess_never_runs_the_planted_command(planted):
    """The report's exact reproduction, in a fresh interpreter."""
    index_path, marker = planted
    code = ("import sys; from shardstream.training import TrainingDataset\n"
            f"ds = TrainingDataset({str(index_path)!r}, batch_size=2, shuffle='stream')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "UnsafeURLError" in result.stderr
    assert not marker.exists()
