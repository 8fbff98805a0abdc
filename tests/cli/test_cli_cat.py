"""shardstream cat: concatenation, seeded mixing, stdout streams, repeated keys, every input kind."""

from __future__ import annotations

import gzip

from cli_helpers import keys, members, run_cli, shell, write_tar

from shardstream.cli import main
from shardstream.writer import TarWriter


def test_concatenates_in_order_byte_for_byte(inputs):
    assert run_cli("cat", "a.tar", "b.tar", "-o", "ab.tar") == 0
    assert keys("ab.tar") == keys("a.tar") + keys("b.tar")
    assert members("ab.tar") == members("a.tar") + members("b.tar")


def test_mix_is_seeded_and_keeps_every_sample(inputs):
    for name, seed in (("m1.tar", "3"), ("m2.tar", "3"), ("m3.tar", "4")):
        assert run_cli("cat", "a.tar", "b.tar", "--mix", "--seed", seed, "-o", name) == 0
    assert (inputs / "m1.tar").read_bytes() == (inputs / "m2.tar").read_bytes()
    mixed = keys("m1.tar")
    assert sorted(mixed) == sorted(keys("a.tar") + keys("b.tar")) and mixed != keys("m3.tar")
    assert [k for k in mixed if k.startswith("a")] == keys("a.tar")  # each dataset keeps its own order
    assert mixed[:6] != keys("a.tar")


def test_stdout_output(inputs, capsysbinary):
    assert main(["cat", "a.tar", "b.tar", "-o", "-"]) == 0
    (inputs / "from-stdout.tar").write_bytes(capsysbinary.readouterr().out)
    assert keys("from-stdout.tar") == keys("a.tar") + keys("b.tar")


def test_every_kind_of_input(inputs):
    (inputs / "b.tar.gz").write_bytes(gzip.compress((inputs / "b.tar").read_bytes()))
    r = shell("cat a.tar | shardstream cat - 'pipe:cat b.tar' file:a.tar b.tar.gz --duplicate-keys rename "
              "-o all.tar", inputs)
    assert r.returncode == 0, r.stderr
    got = keys(inputs / "all.tar")
    assert got == keys(inputs / "a.tar") + keys(inputs / "b.tar") + [k + "_1" for k in keys(inputs / "a.tar")] + [
        k + "_1" for k in keys(inputs / "b.tar")]


def test_fields_starting_with_an_underscore_are_data_too(inputs):
    with TarWriter(str(inputs / "meta.tar"), encoder=False, keep_meta=True) as sink:
        sink.write({"__key__": "a", "txt": "x", "_private": b"p", "__odd__": b"o"})
    assert run_cli("cat", "meta.tar", "-o", "copy.tar") == 0
    assert members("copy.tar") == members("meta.tar") == [("a.__odd__", b"o"), ("a._private", b"p"), ("a.txt", b"x")]


def test_repeated_keys(inputs, capsys):
    assert run_cli("cat", "a.tar", "a.tar", "-o", "twice.tar") == 3
    err = capsys.readouterr().err
    assert "'a000000'" in err and "--duplicate-keys rename" in err
    assert not (inputs / "twice.tar").exists()
    assert run_cli("cat", "a.tar", "a.tar", "--duplicate-keys", "allow", "-o", "twice.tar") == 0
    assert len(keys("twice.tar")) == 12
    # in separate shards, the same key is not a repeat
    assert run_cli("cat", "a.tar", "a.tar", "-o", "t-%02d.tar", "--maxcount", "6") == 0
    assert keys("t-00.tar") == keys("t-01.tar") == keys("a.tar")
    write_tar(inputs / "big.tar", [{"__key__": f"k{i}", "txt": "x" * 9000} for i in range(3)])  # 30720 bytes
    assert run_cli("cat", "big.tar", "big.tar", "-o", "u-%02d.tar", "--maxsize", "30720") == 0  # boundary by size
    assert keys("u-00.tar") == keys("u-01.tar") == ["k0", "k1", "k2"]


def test_cat_into_split_through_a_real_pipe(inputs):
    r = shell("shardstream cat a.tar b.tar -o - | shardstream split - -n 3 -o 'part-%02d.tar'", inputs)
    assert r.returncode == 0, r.stderr
    parts = [keys(inputs / f"part-{i:02d}.tar") for i in range(3)]
    assert [len(p) for p in parts] == [4, 4, 4]
    assert sorted(k for p in parts for k in p) == sorted(keys(inputs / "a.tar") + keys(inputs / "b.tar"))


def test_refuses_to_overwrite_an_input(inputs, capsys):
    assert run_cli("cat", "a.tar", "b.tar", "-o", "b.tar") == 2
    assert "overwrite the input" in capsys.readouterr().err
    assert run_cli("cat", "shards-000001.tar", "-o", "shards-%06d.tar") == 2


def test_seed_needs_mix(inputs):
    assert run_cli("cat", "a.tar", "--seed", "1", "-o", "x.tar") == 2
