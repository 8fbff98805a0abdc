"""shardstream verify: every problem reported with shard, member and offset; keeps going; exit 1 on problems."""

from __future__ import annotations

import io
import json
import pickle
import tarfile

from cli_helpers import png, write_tar

from shardstream.cli import main
from shardstream.cli.verify import verify_shard
from shardstream.samples import KeyRule


def raw_tar(path, members: list[tuple[str, bytes]]) -> bytes:
    """A tar with exactly these members, in this order (tarfile, so that anything goes)."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with open(path, "rb") as f:
        return f.read()


def report(capsys, *args) -> tuple[int, dict]:
    code = main(["verify", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_a_good_dataset(inputs, capsys):
    assert main(["verify", "dataset.tar", "a.tar"]) == 0
    out = capsys.readouterr().out
    assert "dataset.tar: ok, 20 samples, 80 fields decoded" in out and "no problems" in out


def test_every_problem_of_a_shard_is_reported(inputs, capsys):
    raw_tar(inputs / "bad.tar", [
        ("a.txt", b"fine"), ("a.cls", b"1"),
        ("b.png", b"not a png"), ("b.cls", b"x"),       # two fields that do not decode
        ("c.txt", b"one"), ("c.txt", b"two"),           # duplicate extension
        ("README", b"no extension"),
        ("d.json", b"{bad"), ("d.png", png(1)),
        ("a.jpg", b"late"),                             # interleaved key
        ("../evil.txt", b"x"),                          # unsafe name
        ("e.txt", b"still checked after all that"),
    ])
    code, rep = report(capsys, "bad.tar")
    assert code == 1
    problems = rep["shards"][0]["problems"]
    by_member = {p["member"]: p for p in problems}
    assert set(by_member) == {"b.png", "b.cls", "c.txt", "README", "d.json", "a.jpg", "../evil.txt"}
    assert by_member["b.png"]["offset"] == 2560 and by_member["b.png"]["key"] == "b"
    assert "image" in by_member["b.png"]["message"] and "int" in by_member["b.cls"]["message"]
    assert "twice" in by_member["c.txt"]["message"] and by_member["c.txt"]["offset"] == 5632
    assert "no extension" in by_member["README"]["message"]
    assert "again" in by_member["a.jpg"]["message"]
    assert "unsafe member name" in by_member["../evil.txt"]["message"]
    assert [p["offset"] for p in problems] == sorted(p["offset"] for p in problems)
    assert rep["shards"][0]["samples"] == 5  # a, b, d, ../evil, e: checking went on
    assert rep["problems"] == len(problems) == 7


def test_text_report_names_shard_member_and_offset(inputs, capsys):
    raw_tar(inputs / "bad.tar", [("a.txt", b"x"), ("a.cls", b"seven")])
    assert main(["verify", "bad.tar", "a.tar"]) == 1
    out = capsys.readouterr().out
    assert "bad.tar: offset 1536, member 'a.cls', sample 'a': cannot decode .cls data as int" in out
    assert "a.tar: ok" in out and "1 problem in 1 shard" in out


def test_broken_headers_stop_the_shard_not_the_run(inputs, capsys):
    data = bytearray(raw_tar(inputs / "whole.tar", [("a.txt", b"x"), ("b.txt", b"y"), ("c.txt", b"z")]))
    data[1024 + 148] ^= 0x07  # checksum of b.txt's header
    (inputs / "corrupt.tar").write_bytes(bytes(data))
    (inputs / "cut.tar").write_bytes(bytes(data[:1300]))
    code, rep = report(capsys, "corrupt.tar", "cut.tar", "dataset.tar")
    assert code == 1
    corrupt, cut, good = rep["shards"]
    assert corrupt["problems"][0]["offset"] == 1024 and "checksum" in corrupt["problems"][0]["message"]
    assert cut["problems"] and good["problems"] == [] and good["samples"] == 20


def test_a_missing_end_of_archive_is_a_problem(inputs, capsys):
    data = raw_tar(inputs / "t.tar", [("a.txt", b"x")])
    (inputs / "noend.tar").write_bytes(data[:1024])
    code, rep = report(capsys, "noend.tar")
    assert code == 1 and "end" in rep["shards"][0]["problems"][0]["message"]


def test_unsafe_fields_are_not_checked_unless_allowed(inputs, capsys):
    write_tar(inputs / "p.tar", [{"__key__": "a", "pyd": pickle.dumps({"x": 1}), "weird": b"?"}])
    code, rep = report(capsys, "p.tar")
    assert code == 0 and rep["shards"][0]["not_checked"] == {"unsafe": 1, "unknown extension": 1}
    assert main(["verify", "p.tar"]) == 0
    assert "not checked: 1 (unknown extension), 1 (unsafe)" in capsys.readouterr().out
    code, rep = report(capsys, "p.tar", "--allow-unsafe")
    assert code == 0 and rep["shards"][0]["fields_checked"] == 1


def test_no_decode_checks_structure_only(inputs, capsys):
    raw_tar(inputs / "bad.tar", [("a.png", b"junk")])
    assert main(["verify", "--no-decode", "bad.tar"]) == 0
    assert main(["verify", "bad.tar"]) == 1
    capsys.readouterr()


def test_unopenable_and_piped_shards(inputs, capsys):
    code, rep = report(capsys, "nope.tar", "pipe:cat a.tar", "pipe:exit 3")
    assert code == 1
    nope, piped, failed = rep["shards"]
    assert "cannot open" in nope["problems"][0]["message"]
    assert piped["problems"] == [] and piped["samples"] == 6
    assert "status 3" in failed["problems"][0]["message"]


def test_quiet_prints_only_problems(inputs, capsys):
    raw_tar(inputs / "bad.tar", [("a.cls", b"x")])
    assert main(["verify", "-q", "a.tar", "bad.tar"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("bad.tar: offset 512")


def test_stale_indexes_are_problems(inputs, capsys):
    assert main(["index", "a.tar", "--dali"]) == 0
    assert main(["verify", "a.tar"]) == 0
    capsys.readouterr()
    (inputs / "a.tar").write_bytes((inputs / "b.tar").read_bytes())
    code, rep = report(capsys, "a.tar")
    messages = [p["message"] for p in rep["shards"][0]["problems"]]
    assert code == 1 and len(messages) == 2
    assert "stale" in messages[0] and "DALI" in messages[1]
    assert main(["verify", "--no-index", "a.tar"]) == 0
    assert main(["index", "a.tar", "--dali"]) == 0
    assert main(["verify", "a.tar"]) == 0
    capsys.readouterr()


def test_verify_shard_api(inputs):
    rep = verify_shard("dataset.tar", KeyRule())
    assert rep.samples == 20 and rep.fields_checked == 80 and rep.problems == []
