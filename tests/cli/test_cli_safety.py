"""Writing commands never overwrite silently; --overwrite replaces a file or a whole set of shards;
--maxsize below a tar record is refused; --dry-run writes nothing; --json reports what was written."""

from __future__ import annotations

import json
import os

import pytest
from cli_helpers import keys, run_cli


def shards(root, prefix: str) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(prefix))


def test_existing_file_is_refused_naming_it_and_the_option(inputs, capsys):
    before = (inputs / "a.tar").read_bytes()
    assert run_cli("cat", "b.tar", "-o", "a.tar") == 2
    err = capsys.readouterr().err
    assert "'a.tar' exists" in err and "--overwrite" in err
    assert (inputs / "a.tar").read_bytes() == before
    assert run_cli("cat", "b.tar", "-o", "a.tar", "--overwrite") == 0
    assert keys("a.tar") == keys("b.tar")


@pytest.mark.parametrize("command", [["split", "--maxcount", "3"], ["cat"], ["shuffle"]])
def test_pattern_with_other_shards_is_refused(inputs, capsys, command):
    assert run_cli(command[0], "dataset.tar", *command[1:], "-o", "shards-%06d.tar") == 2
    err = capsys.readouterr().err
    assert "'shards-%06d.tar' already has shards ('shards-000000.tar' and 3 more)" in err and "--overwrite" in err
    assert shards(inputs, "shards-") == [f"shards-{i:06d}.tar" for i in range(4)]


def test_overwrite_replaces_the_whole_old_set(inputs, capsys):
    assert run_cli("split", "dataset.tar", "--maxcount", "4", "-o", "out/p-%03d.tar") == 0  # 5 shards
    assert shards(inputs / "out", "p-") == [f"p-{i:03d}.tar" for i in range(5)]
    assert run_cli("split", "a.tar", "--maxcount", "3", "-o", "out/p-%03d.tar", "--overwrite", "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert os.listdir(inputs / "out") == ["p-000.tar", "p-001.tar"] or sorted(os.listdir(inputs / "out")) == [
        "p-000.tar", "p-001.tar"]  # no leftovers of the old set, no temporary files
    assert result["replaced"] == ["out/p-002.tar", "out/p-003.tar", "out/p-004.tar"]
    assert [s["path"] for s in result["shards"]] == ["out/p-000.tar", "out/p-001.tar"]
    assert keys("out/p-000.tar") + keys("out/p-001.tar") == keys("a.tar")


def test_split_n_replaces_the_old_set(inputs):
    assert run_cli("split", "dataset.tar", "-n", "5", "-o", "q-%02d.tar") == 0
    assert run_cli("split", "dataset.tar", "-n", "2", "-o", "q-%02d.tar") == 2
    assert run_cli("split", "dataset.tar", "-n", "2", "-o", "q-%02d.tar", "--overwrite") == 0
    assert shards(inputs, "q-") == ["q-00.tar", "q-01.tar"] and not shards(inputs, ".q-")
    assert len(keys("q-00.tar")) + len(keys("q-01.tar")) == 20


def test_a_failure_leaves_the_old_set_untouched(inputs, capsys):
    assert run_cli("split", "dataset.tar", "--maxcount", "5", "-o", "r-%02d.tar") == 0
    before = {n: (inputs / n).read_bytes() for n in shards(inputs, "r-")}
    # a.tar twice: the repeated key stops the command after the first shard was written under a temporary name
    assert run_cli("cat", "a.tar", "a.tar", "-o", "r-%02d.tar", "--maxcount", "100", "--overwrite") == 3
    assert {n: (inputs / n).read_bytes() for n in shards(inputs, "r-")} == before
    assert not [n for n in os.listdir(inputs) if n.endswith(".partial")]


def test_maxsize_below_a_tar_record_is_an_error(inputs, capsys):
    assert run_cli("split", "dataset.tar", "--maxsize", "5K", "-o", "tiny-%03d.tar") == 2
    assert "below the tar record size (10240 bytes" in capsys.readouterr().err
    assert run_cli("split", "dataset.tar", "--maxsize", "10K", "-o", "tiny-%03d.tar") == 0


@pytest.mark.parametrize("argv", [
    ["create", "images", "--imagefolder", "-o", "d-%02d.tar", "--maxcount", "2"],
    ["cat", "a.tar", "b.tar", "-o", "d-%02d.tar", "--maxcount", "5"],
    ["split", "dataset.tar", "-n", "3", "-o", "d-%02d.tar"],
    ["shuffle", "dataset.tar", "-o", "d-%02d.tar", "--maxcount", "7"],
])
def test_dry_run_reports_exactly_what_is_then_written(inputs, capsys, argv):
    assert run_cli(*argv, "--dry-run", "--json") == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["dry_run"] and not shards(inputs, "d-") and not os.path.exists("classes.txt")
    assert run_cli(*argv, "--json") == 0
    done = json.loads(capsys.readouterr().out)
    assert planned["shards"] == done["shards"] and planned["samples"] == done["samples"] > 0
    assert [s["bytes"] for s in done["shards"]] == [os.path.getsize(s["path"]) for s in done["shards"]]
    assert done["command"] == argv[0] and not done["dry_run"]


def test_dry_run_names_what_would_be_replaced(inputs, capsys):
    assert run_cli("cat", "dataset.tar", "-o", "shards-%06d.tar", "--maxcount", "10", "--overwrite", "--dry-run") == 0
    err = capsys.readouterr().err
    assert "dry run: would write 20 samples" in err and "would replace 2 old files" in err
    assert shards(inputs, "shards-") == [f"shards-{i:06d}.tar" for i in range(4)]


def test_json_refuses_stdout_tar(inputs, capsys):
    assert run_cli("cat", "a.tar", "-o", "-", "--json") == 2
    assert "--json prints on standard output" in capsys.readouterr().err


def test_cat_select_and_weighted_mix(inputs, capsys):
    assert run_cli("cat", "dataset.tar", "--skip", "3", "--count", "4", "-o", "s.tar") == 0
    assert keys("s.tar") == [f"d{i:06d}" for i in range(3, 7)]
    assert run_cli("cat", "dataset.tar", "--slice", "1:10:3", "-o", "t.tar") == 0
    assert keys("t.tar") == [f"d{i:06d}" for i in (1, 4, 7)]
    assert run_cli("cat", "a.tar", "b.tar", "--mix", "--weights", "9,1", "--seed", "3", "--count", "6", "-o", "w1.tar") == 0
    assert run_cli("cat", "a.tar", "b.tar", "--mix", "--weights", "9,1", "--seed", "3", "--count", "6", "-o", "w2.tar") == 0
    assert (inputs / "w1.tar").read_bytes() == (inputs / "w2.tar").read_bytes()
    assert sum(k.startswith("a") for k in keys("w1.tar")) >= 4
    assert run_cli("cat", "a.tar", "b.tar", "--mix", "--weights", "1", "-o", "w3.tar") == 2
    assert run_cli("cat", "a.tar", "--weights", "1", "-o", "w3.tar") == 2
    assert run_cli("cat", "a.tar", "--slice", "1:2", "--skip", "1", "-o", "w3.tar") == 2


def test_workers_give_the_same_bytes(inputs, capsys):
    for n in ("1", "3"):
        assert run_cli("create", "images", "--imagefolder", "--shuffle", "-j", n, "--maxcount", "2",
                       "-o", f"c{n}/i-%02d.tar") == 0
        assert run_cli("split", "shards-00000{0..3}.tar", "-j", n, "--maxcount", "6", "-o", f"s{n}/p-%02d.tar") == 0
    for prefix in ("c", "s"):
        one, three = inputs / f"{prefix}1", inputs / f"{prefix}3"
        assert sorted(os.listdir(one)) == sorted(os.listdir(three))
        assert all((one / n).read_bytes() == (three / n).read_bytes() for n in os.listdir(one))
    assert len(os.listdir(inputs / "s3")) == 4 and keys("s3/p-00.tar") == [f"s{i:06d}" for i in range(6)]
    capsys.readouterr()
    assert run_cli("verify", "-j", "2", "shards-000000.tar", "shards-000001.tar", "shards-000002.tar") == 0
    assert capsys.readouterr().out.splitlines()[:3] == [
        f"shards-00000{i}.tar: ok, 5 samples, 20 fields decoded" for i in range(3)]


def test_sort_by_key_field_and_json(inputs, capsys):
    assert run_cli("cat", "b.tar", "a.tar", "-o", "ba.tar") == 0
    assert run_cli("sort", "ba.tar", "-o", "k.tar") == 0
    assert keys("k.tar") == sorted(keys("ba.tar"))
    assert run_cli("sort", "dataset.tar", "--by", "cls", "-o", "c.tar") == 0  # ties keep the input order
    assert keys("c.tar") == [f"d{i:06d}" for r in range(3) for i in range(20) if i % 3 == r]
    # through temporary runs (tiny memory) and descending: the same as in memory
    assert run_cli("sort", "dataset.tar", "--by", "json:i", "--reverse", "-o", "j1.tar") == 0
    assert run_cli("sort", "dataset.tar", "--by", "json:i", "--reverse", "--memory", "2K", "-o", "j2.tar") == 0
    assert keys("j1.tar") == [f"d{i:06d}" for i in reversed(range(20))]
    assert (inputs / "j1.tar").read_bytes() == (inputs / "j2.tar").read_bytes()
    assert run_cli("sort", "dataset.tar", "--by", "json:nope", "--missing", "error", "-o", "m.tar") == 3
    assert "has no 'json:nope' to sort by" in capsys.readouterr().err


def test_ls_fields_table(inputs, capsys):
    assert run_cli("ls", "dataset.tar", "--fields", "key,cls,txt,json:i,nope") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "key\tcls\ttxt\tjson:i\tnope" and lines[3] == "d000002\t2\tsample d2\t2\t" and len(lines) == 21
    assert run_cli("ls", "dataset.tar", "--fields", "key,json:i", "--json") == 0
    assert json.loads(capsys.readouterr().out.splitlines()[1]) == {"key": "d000001", "json:i": 1}


def test_dry_run_of_extract_index_and_cache_clear(inputs, capsys):
    assert run_cli("extract", "dataset.tar", "-o", "x", "--limit", "1", "--dry-run") == 0
    assert sorted(capsys.readouterr().out.split()) == [f"x/d000000.{e}" for e in ("cls", "json", "png", "txt")]
    assert not os.path.exists("x")
    assert run_cli("index", "a.tar", "b.tar", "--dali", "--dry-run") == 0
    assert capsys.readouterr().out.split() == ["a.tar.ssidx", "b.tar.ssidx", "a.idx", "b.idx"]
    assert not [n for n in os.listdir(".") if n.endswith((".ssidx", ".idx"))]
    assert run_cli("cache", "clear", "--cache-dir", "shard-cache", "--max-size", "2K", "--dry-run") == 0
    assert capsys.readouterr().out.split() == ["http_host_a.0123456789abcdef.tar"]  # the least recently used
    assert len(os.listdir("shard-cache")) == 2


@pytest.mark.parametrize("memory", ["1G", "2K"])  # in memory, and through temporary shards in every worker
def test_parallel_shuffle_gives_the_same_bytes(inputs, memory):
    shards = [f"shards-00000{i}.tar" for i in range(4)]
    for n in ("1", "3"):
        assert run_cli("shuffle", *shards, "--seed", "4", "-j", n, "--memory", memory, "--buckets", "3",
                       "-o", f"p{n}/s-%02d.tar", "--maxcount", "6") == 0
    one, three = inputs / "p1", inputs / "p3"
    assert sorted(os.listdir(one)) == sorted(os.listdir(three)) == [f"s-{k:02d}.tar" for k in range(4)]
    assert all((one / n).read_bytes() == (three / n).read_bytes() for n in os.listdir(one))
    assert sorted(k for n in sorted(os.listdir(three)) for k in keys(three / n)) == [f"s{i:06d}" for i in range(20)]
