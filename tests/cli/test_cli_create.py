"""shardstream create: directory trees, ImageFolders, recipes, JSON Lines; bytes copied, output deterministic."""

from __future__ import annotations

import base64
import io
import json
import sys

import pytest
from cli_helpers import keys, members, png, run_cli, shell

from shardstream.cli import main


def test_directory_tree_groups_files_by_key(inputs):
    assert run_cli("create", "images", "-o", "out.tar") == 0
    got = dict(members("out.tar"))
    assert sorted(got) == ["cat/cat0000.json", "cat/cat0000.png", "cat/cat0001.png", "cat/cat0002.png",
                           "dog/dog0000.png", "dog/dog0001.png"]
    assert got["cat/cat0000.png"] == (inputs / "images/cat/cat0000.png").read_bytes()  # never re-encoded
    assert keys("out.tar") == ["cat/cat0000", "cat/cat0001", "cat/cat0002", "dog/dog0000", "dog/dog0001"]


def test_imagefolder_adds_classes_and_a_class_list(inputs):
    assert run_cli("create", "images", "--imagefolder", "-o", "train/train-%06d.tar", "--maxcount", "2") == 0
    assert (inputs / "train/classes.txt").read_text() == "cat\ndog\n"
    shards = sorted((inputs / "train").glob("train-*.tar"))
    assert len(shards) == 3
    labels = {name: data for shard in shards for name, data in members(shard) if name.endswith(".cls")}
    assert labels == {"cat/cat0000.cls": b"0", "cat/cat0001.cls": b"0", "cat/cat0002.cls": b"0",
                      "dog/dog0000.cls": b"1", "dog/dog0001.cls": b"1"}


def test_class_list_elsewhere_and_stdout_output(inputs, capsysbinary):
    assert main(["create", "images", "--imagefolder", "-o", "-", "--class-list", "names.txt"]) == 0
    out = capsysbinary.readouterr().out
    assert (inputs / "names.txt").read_text() == "cat\ndog\n"
    (inputs / "stdout.tar").write_bytes(out)
    assert len(keys(inputs / "stdout.tar")) == 5


def test_shuffle_is_seeded_and_deterministic(inputs):
    for name, seed in (("a1.tar", "1"), ("a2.tar", "1"), ("b2.tar", "2")):
        assert run_cli("create", "images", "--shuffle", "--seed", seed, "-o", name) == 0
    assert (inputs / "a1.tar").read_bytes() == (inputs / "a2.tar").read_bytes()
    assert sorted(keys("a1.tar")) == sorted(keys("b2.tar")) and keys("a1.tar") != keys("b2.tar")
    assert run_cli("create", "images", "-o", "c1.tar") == 0
    assert run_cli("create", "images", "-o", "c2.tar") == 0
    assert (inputs / "c1.tar").read_bytes() == (inputs / "c2.tar").read_bytes()


def test_hidden_and_extensionless_files_are_skipped(inputs, capsys):
    (inputs / "images/cat/.DS_Store").write_bytes(b"junk")
    (inputs / "images/cat/README").write_text("no extension")
    (inputs / "images/.cache").mkdir()
    (inputs / "images/.cache/x.png").write_bytes(b"junk")
    assert run_cli("create", "images", "-o", "out.tar") == 0
    assert "skipped 2 files" in capsys.readouterr().err
    assert not any(".DS_Store" in n or "README" in n or ".cache" in n for n, _ in members("out.tar"))
    assert run_cli("create", "images", "--include-hidden", "-o", "all.tar") == 0
    names = [n for n, _ in members("all.tar")]
    assert ".cache/x.png" in names and not any("DS_Store" in n for n in names)  # no key: skipped anyway


def test_recipe_sources(inputs):
    assert run_cli("create", "recipe.txt", "-o", "r.tar") == 0
    assert members("r.tar") == [("r0.cls", b"1"), ("r0.txt", b"hello world"), ("r1.cls", b"2"),
                                ("r1.txt", b"recipe source file")]


def test_recipe_pipe_sources_need_allow_pipe(inputs, capsys):
    (inputs / "piped.txt").write_text("p.txt pipe:echo piped\n")
    assert run_cli("create", "piped.txt", "-o", "p.tar") == 2
    assert "--allow-commands" in capsys.readouterr().err
    assert not (inputs / "p.tar").exists()
    assert run_cli("create", "piped.txt", "--allow-pipe", "-o", "p.tar") == 0
    assert members("p.tar") == [("p.txt", b"piped\n")]


@pytest.mark.parametrize("recipe, problem", [
    ("a.txt text:x\nb.txt text:y\na.cls text:1\n", "appears again"),
    ("a.txt text:x\na.txt text:y\n", "twice"),
    ("README text:x\n", "no extension"),
    ("../up.txt text:x\n", "unsafe"),
    ("/abs.txt text:x\n", "unsafe"),
    ("lonely\n", "expected"),
])
def test_bad_recipes_name_the_line(inputs, capsys, recipe, problem):
    (inputs / "bad.txt").write_text("# header\n" + recipe)
    assert run_cli("create", "bad.txt", "-o", "bad.tar") == 2
    err = capsys.readouterr().err
    assert problem in err and "bad.txt:" in err


def test_recipe_from_stdin(inputs):
    r = shell("printf 'x.txt text:hello\\nx.cls text:1\\n' | shardstream create - -o hello.tar", inputs)
    assert r.returncode == 0, r.stderr
    assert members(inputs / "hello.tar") == [("x.cls", b"1"), ("x.txt", b"hello")]


def test_jsonl_fields(inputs):
    (inputs / "pic.png").write_bytes(png(9))
    with open(inputs / "more.jsonl", "w") as f:
        f.write(json.dumps({"txt": "one", "cls": 3, "json": {"a": [1, 2]}, "png.path": "pic.png"}) + "\n\n")
        f.write(json.dumps({"__key__": "custom", "jpg.b64": base64.b64encode(b"\xff\xd8raw").decode()}) + "\n")
    assert run_cli("create", "more.jsonl", "-o", "j.tar") == 0
    got = dict(members("j.tar"))
    assert got == {"00000000.cls": b"3", "00000000.json": b'{"a": [1, 2]}', "00000000.png": png(9),
                   "00000000.txt": b"one", "custom.jpg": b"\xff\xd8raw"}


def test_jsonl_from_stdin_is_detected(inputs, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'\n{"txt": "a"}\n{"txt": "b"}\n')))
    assert main(["create", "-", "-o", "s.tar"]) == 0
    assert members("s.tar") == [("00000000.txt", b"a"), ("00000001.txt", b"b")]


@pytest.mark.parametrize("line, problem", [
    ("not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"png.b64": "@@@"}', "base64"),
    ('{"__key__": "only"}', "no fields"),
    ('{"x.path": "pipe:echo hi"}', "--allow-commands"),
])
def test_bad_jsonl_names_the_line(inputs, capsys, line, problem):
    (inputs / "bad.jsonl").write_text('{"txt": "fine"}\n' + line + "\n")
    assert run_cli("create", "bad.jsonl", "-o", "bad.tar") == 2
    err = capsys.readouterr().err
    assert problem in err and "bad.jsonl:2" in err
    assert not (inputs / "bad.tar").exists()  # all or nothing


def test_repeated_keys_in_jsonl(inputs, capsys):
    (inputs / "rep.jsonl").write_text('{"__key__": "k", "txt": "a"}\n{"__key__": "k", "txt": "b"}\n')
    assert run_cli("create", "rep.jsonl", "-o", "rep.tar") == 3
    assert "appears twice" in capsys.readouterr().err
    assert run_cli("create", "rep.jsonl", "--duplicate-keys", "rename", "-o", "rep.tar") == 0
    assert keys("rep.tar") == ["k", "k_1"]


def test_maxsize_shards(inputs):
    (inputs / "many.jsonl").write_text("".join(json.dumps({"txt": "x" * 600, "cls": i}) + "\n" for i in range(40)))
    assert run_cli("create", "many.jsonl", "-o", "c-%03d.tar", "--maxsize", "20K") == 0
    shards = sorted(inputs.glob("c-*.tar"))
    assert len(shards) > 1 and all(s.stat().st_size <= 20480 for s in shards)
    assert sum(len(keys(s)) for s in shards) == 40


def test_option_mistakes(inputs, capsys):
    assert run_cli("create", "recipe.txt", "--imagefolder", "--from", "recipe", "-o", "x.tar") == 2
    assert run_cli("create", "images", "--seed", "1", "-o", "x.tar") == 2
    assert run_cli("create", "images", "-o", "x.tar", "--maxcount", "3") == 2  # needs a pattern
    assert run_cli("create", "samples.jsonl", "--shuffle", "-o", "x.tar") == 2
    assert run_cli("create", "nowhere", "--from", "dir", "-o", "x.tar") == 2
    capsys.readouterr()


def test_the_class_list_is_never_written_through_a_symbolic_link(inputs, capsys):
    outside = inputs / "outside.txt"
    (inputs / "train").mkdir()
    (inputs / "train/classes.txt").symlink_to(outside)  # dangling: os.path.exists says no file is there
    assert run_cli("create", "images", "--imagefolder", "-o", "train/train.tar") == 2
    assert "symbolic link" in capsys.readouterr().err
    assert not outside.exists() and not (inputs / "train/train.tar").exists()
    for jobs in ("1", "2"):  # the parallel writer too; --overwrite replaces the link, never writes its target
        assert run_cli("create", "images", "--imagefolder", "-o", "train/t-%06d.tar", "--maxcount", "2", "-j", jobs,
                       "--overwrite") == 0  # fmt: skip
        assert not outside.exists() and not (inputs / "train/classes.txt").is_symlink()
        assert (inputs / "train/classes.txt").read_text() == "cat\ndog\n"
        (inputs / "train/classes.txt").unlink()
        (inputs / "train/classes.txt").symlink_to(outside)


def test_imagefolders_with_the_same_classes_share_a_class_list(inputs, capsys):
    assert run_cli("create", "images", "--imagefolder", "-o", "out/train.tar") == 0
    assert run_cli("create", "images", "--imagefolder", "-o", "out/val.tar") == 0  # same classes: no conflict
    assert (inputs / "out/classes.txt").read_text() == "cat\ndog\n"
    (inputs / "images/bird").mkdir()
    (inputs / "images/bird/b0.png").write_bytes(png(9))
    assert run_cli("create", "images", "--imagefolder", "-o", "out/test.tar") == 2
    err = capsys.readouterr().err
    assert "out/classes.txt" in err and "other classes (cat, dog)" in err and "--overwrite" in err
    assert not (inputs / "out/test.tar").exists() and (inputs / "out/classes.txt").read_text() == "cat\ndog\n"
    assert run_cli("create", "images", "--imagefolder", "-o", "out/test.tar", "--overwrite") == 0
    assert (inputs / "out/classes.txt").read_text() == "bird\ncat\ndog\n"
