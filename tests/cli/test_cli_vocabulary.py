"""One CLI vocabulary: every subcommand's parser is walked, and a writing command without ``-o/--output``,
``--overwrite``, ``--dry-run`` and ``--json`` (``-j/--workers`` where it works in parallel) fails; so does a help
text naming a private module or showing doubled quotes, and a top-level help listing a command twice. The old
spellings still work, with a warning naming the new one; every reading command takes the same inputs."""

from __future__ import annotations

import argparse
import json
import re
import tarfile

import pytest
from cli_helpers import keys, run_cli

from shardstream.cli import build_parser

#: the commands that write outputs; each must have -o/--output, --overwrite, --dry-run and --json
WRITES = {"create", "convert", "map", "cat", "split", "shuffle", "sort", "extract", "index"}
#: the commands that work on several processes; each must have -j/--workers
PARALLEL = {"create", "convert", "map", "split", "shuffle", "verify"}
#: the commands that only read (ls, info, verify, view) or manage the shard cache (cache: no output of its own)
OTHERS = {"ls", "info", "verify", "view", "cache"}
#: the commands that run resumable jobs: --redo recomputes finished tasks, distinct from --overwrite
JOBS = {"convert", "map"}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand once (an alias, such as reshard, is the parser of its command)."""
    seen: dict[int, str] = {}
    out = {}
    for name, parser in subparsers(build_parser()).items():
        if id(parser) not in seen:
            seen[id(parser)] = name
            out[name] = parser
    return out


def option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return parser._option_string_actions.get(flag)


def shown_options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions if a.help != argparse.SUPPRESS for s in a.option_strings}


def test_every_command_is_classified():
    assert set(commands()) == WRITES | OTHERS, "classify the new command in WRITES or OTHERS (and PARALLEL)"
    assert PARALLEL <= set(commands()) and JOBS <= WRITES


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writing_commands_speak_the_vocabulary(name):
    parser = commands()[name]
    for short, long in (("-o", "--output"),) + ((("-j", "--workers"),) if name in PARALLEL else ()):
        assert option(parser, short) is not None and option(parser, short) is option(parser, long), (name, long)
    for flag in ("--overwrite", "--dry-run", "--json"):
        assert option(parser, flag) is not None, (name, flag)
    assert {"-o", "--output", "--overwrite", "--dry-run", "--json"} <= shown_options(parser), name
    assert "-o" in parser.format_usage(), (name, parser.format_usage())


@pytest.mark.parametrize("name", sorted(PARALLEL - WRITES))
def test_parallel_readers_take_workers(name):
    parser = commands()[name]
    assert option(parser, "-j") is option(parser, "--workers") is not None


@pytest.mark.parametrize("name", sorted(JOBS))
def test_redo_is_not_overwrite(name):
    parser = commands()[name]
    assert option(parser, "--redo").dest == "redo" and option(parser, "--overwrite").dest == "overwrite"


def help_texts() -> dict[str, str]:
    texts = {"shardstream": build_parser().format_help()}
    texts.update({name: parser.format_help() for name, parser in commands().items()})
    return texts


PRIVATE = re.compile(r"\b[a-z_]\w*(?:\.\w+)*\._[a-z]\w*")


@pytest.mark.parametrize("name", sorted(["shardstream", *WRITES, *OTHERS]))
def test_help_names_no_private_module_and_doubles_no_quote(name):
    text = help_texts()[name]
    assert not PRIVATE.findall(text), (name, PRIVATE.findall(text))
    doubled = [line for line in text.splitlines() if "''" in line or '""' in line]
    assert doubled == [], (name, doubled)


def test_the_private_module_rule_bites():
    assert PRIVATE.findall("described in shardstream.cli._sources.") == ["shardstream.cli._sources"]


def test_top_level_help_lists_each_command_once():
    text = build_parser().format_help()
    for name in commands():
        listed = re.findall(rf"^\s+{name}\b", text, re.M)
        assert len(listed) == 1, (name, listed)


@pytest.mark.parametrize("name", sorted(JOBS))
def test_job_usage_shows_the_output_option(name):
    usage = commands()[name].format_usage()
    assert "-o DEST" in usage and ("SOURCE [SOURCE ...]" in usage or "INPUT [INPUT ...]" in usage), usage


# -- old spellings ---------------------------------------------------------------------------------------------


def test_extract_dash_c_still_works_with_a_warning(inputs, capsys):
    assert run_cli("extract", "a.tar", "-C", "old", "--limit", "1") == 0
    err = capsys.readouterr().err
    assert "-C is deprecated, write -o DIR" in err
    assert any((inputs / "old").iterdir())
    assert run_cli("extract", "a.tar", "-o", "new", "--limit", "1") == 0
    assert "deprecated" not in capsys.readouterr().err


def test_extract_needs_an_output(inputs, capsys):
    assert run_cli("extract", "a.tar") == 2
    assert "-o DIR" in capsys.readouterr().err


def test_index_old_spellings(inputs, capsys):
    assert run_cli("index", "a.tar", "--dataset", "a.json", "--rebuild") == 0
    err = capsys.readouterr().err
    assert "--dataset is deprecated, write -o PATH" in err and "--rebuild is deprecated, write --overwrite" in err
    assert (inputs / "a.json").exists()


def test_convert_positional_dest_and_old_overwrite(inputs, capsys):
    assert run_cli("convert", "samples.jsonl", "old-out", "--engine", "inline", "-q") == 0
    err = capsys.readouterr().err
    assert "deprecated, write -o old-out" in err
    assert run_cli("convert", "samples.jsonl", "-o", "old-out", "--engine", "inline", "--overwrite", "--json") == 0
    out, err = capsys.readouterr()
    assert "--overwrite is the old spelling of --redo" in err and json.loads(out)["reused"] == 0
    assert run_cli("convert", "samples.jsonl", "-o", "old-out", "--engine", "inline", "--json") == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["reused"] == json.loads(out)["tasks"] and "deprecated" not in err
    assert run_cli("convert", "samples.jsonl", "-o", "old-out", "--engine", "inline", "--redo", "--json") == 0
    assert json.loads(capsys.readouterr().out)["reused"] == 0


def test_convert_needs_an_output(inputs, capsys):
    assert run_cli("convert", "samples.jsonl") == 2
    assert "-o DEST" in capsys.readouterr().err


# -- --dry-run and --json on the jobs ----------------------------------------------------------------------------


def test_convert_and_map_dry_run_write_nothing_and_see_finished_tasks(inputs, capsys, tmp_path):
    (inputs / "transforms.py").write_text("def same(sample):\n    return sample\n")
    assert run_cli("convert", "samples.jsonl", "-o", "conv", "--engine", "inline", "--dry-run", "--json") == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["dry_run"] and planned["tasks"] and not any(t["complete"] for t in planned["tasks"])
    assert not (inputs / "conv").exists()
    mapped = ["map", "a.tar", "b.tar", "-o", "mapped", "--function", "transforms:same", "--engine", "inline"]
    assert run_cli(*mapped, "--dry-run") == 0
    out, err = capsys.readouterr()
    assert out.count("would run") == 2 and "dry run: would run 2 tasks" in err and not (inputs / "mapped").exists()
    assert run_cli(*mapped, "--json") == 0
    done = json.loads(capsys.readouterr().out)
    assert done["command"] == "map" and done["samples"] == 12 and len(done["shards"]) == 2
    assert run_cli(*mapped, "--dry-run", "--json") == 0
    assert all(t["complete"] for t in json.loads(capsys.readouterr().out)["tasks"])  # the rerun would skip them
    assert run_cli(*mapped, "--dry-run", "--json", "--redo") == 0
    assert not any(t["complete"] for t in json.loads(capsys.readouterr().out)["tasks"])


def test_extract_and_index_json(inputs, capsys):
    assert run_cli("extract", "a.tar", "-o", "ex", "--limit", "2", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "extract" and doc["samples"] == 2 and len(doc["files"]) == len(set(doc["files"])) > 0
    assert run_cli("index", "a.tar", "--json") == 0
    assert json.loads(capsys.readouterr().out)["built"] == ["a.tar.ssidx"]
    assert run_cli("index", "a.tar", "--json", "--dry-run") == 0
    assert json.loads(capsys.readouterr().out)["written"] == []  # fresh: nothing to rebuild
    assert run_cli("index", "a.tar", "--json", "--dry-run", "--overwrite") == 0
    assert json.loads(capsys.readouterr().out)["written"] == ["a.tar.ssidx"]


# -- one source resolver ---------------------------------------------------------------------------------------


@pytest.fixture
def folder(inputs):
    """out/ holding a.tar and b.tar (12 samples), a spec naming them, and a dataset index of them."""
    (inputs / "out").mkdir()
    for name in ("a.tar", "b.tar"):
        (inputs / "out" / name).write_bytes((inputs / name).read_bytes())
    (inputs / "mix.yaml").write_text("sources:\n  - shards: out/a.tar\n  - shards: out/b.tar\n")
    return inputs


READERS = [
    ["info", "{}", "--json"],
    ["ls", "{}"],
    ["verify", "{}", "--json", "--no-index"],
    ["cat", "{}", "-o", "all.tar"],
    ["sort", "{}", "-o", "all.tar"],
    ["shuffle", "{}", "-o", "all.tar"],
    ["split", "{}", "--maxcount", "100", "-o", "all-%03d.tar"],
    ["extract", "{}", "-o", "extracted"],
]


@pytest.mark.parametrize("argv", READERS, ids=lambda argv: argv[0])
@pytest.mark.parametrize("source", ["out", "out/", "out/*.tar", "out/{a,b}.tar", "mix.yaml"])
def test_every_reading_command_takes_every_kind_of_source(folder, argv, source, capsys):
    assert run_cli(*[source if a == "{}" else a for a in argv], "-q") == 0
    out = capsys.readouterr().out
    if argv[0] == "info":
        assert json.loads(out)["samples"] == 12
    elif argv[0] == "ls":
        assert len(out.splitlines()) == 12
    elif argv[0] == "verify":
        assert len(json.loads(out)["shards"]) == 2
    elif argv[0] == "extract":
        assert len({p.name.split(".")[0] for p in (folder / "extracted").rglob("*") if p.is_file()}) == 12
    else:
        written = folder / ("all-000.tar" if argv[0] == "split" else "all.tar")
        assert len(set(keys(written))) == 12


def test_index_and_a_dataset_index_as_input(folder, capsys):
    assert run_cli("index", "out/", "-o", "out.json", "-q") == 0
    assert (folder / "out" / "a.tar.ssidx").exists() and (folder / "out.json").exists()
    assert run_cli("info", "out.json", "--json") == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 12


def test_a_folder_without_shards_is_named(folder, capsys):
    (folder / "empty").mkdir()
    assert run_cli("info", "empty") == 2
    assert "'empty' names no shard" in capsys.readouterr().err


def test_map_reads_a_folder(folder, capsys):
    (folder / "transforms.py").write_text("def same(sample):\n    return sample\n")
    assert run_cli("map", "out", "-o", "mapped", "--function", "transforms:same", "--engine", "inline", "--json") == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 12
    with tarfile.open(folder / "mapped" / "part-000000-000.tar") as tar:
        assert tar.getnames()
