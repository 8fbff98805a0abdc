"""shardstream shuffle: a seeded permutation, the same whether in memory or through temporary shards."""

from __future__ import annotations

import collections
import os
import random

from cli_helpers import keys, members, run_cli

from shardstream.cli import _bucketsort, shuffle
from shardstream.writer import TarWriter


def test_shuffles_every_sample_deterministically(inputs):
    assert run_cli("shuffle", "dataset.tar", "--seed", "5", "-o", "a2.tar") == 0
    assert run_cli("shuffle", "dataset.tar", "--seed", "5", "-o", "b2.tar") == 0
    assert run_cli("shuffle", "dataset.tar", "--seed", "6", "-o", "c2.tar") == 0
    assert (inputs / "a2.tar").read_bytes() == (inputs / "b2.tar").read_bytes()
    assert sorted(members("a2.tar")) == sorted(members("dataset.tar"))  # bytes unchanged
    assert keys("a2.tar") != keys("dataset.tar") and keys("a2.tar") != keys("c2.tar")


def test_external_shuffle_gives_the_same_bytes(inputs, tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    assert run_cli("shuffle", "shards-000000.tar", "shards-000001.tar", "shards-000002.tar", "-o", "mem.tar") == 0
    assert run_cli("shuffle", "shards-000000.tar", "shards-000001.tar", "shards-000002.tar", "-o", "ext.tar",
                   "--memory", "3K", "--buckets", "2", "--tmpdir", str(spill)) == 0
    assert (inputs / "mem.tar").read_bytes() == (inputs / "ext.tar").read_bytes()
    assert os.listdir(spill) == []  # temporary shards removed


def test_spills_in_bounded_memory():
    samples = [{"__key__": f"k{i:04d}", "bin": bytes([i % 256]) * 1000} for i in range(300)]
    sorter = _bucketsort.Sorter(memory=20_000, buckets=4, tmpdir=None)
    rng = random.Random(1)
    numbered = ((rng.getrandbits(64), i, s) for i, s in enumerate(samples))
    try:
        out = list(sorter.sort(numbered, 0, 1 << 64))
    finally:
        sorter.cleanup()
    assert sorter.spilled > 4  # scattered, and oversized buckets scattered again
    assert [s["__key__"] for s in out] == [s["__key__"] for s in shuffle.shuffled(samples, 1, memory=1 << 30)]
    assert sorted(s["__key__"] for s in out) == [s["__key__"] for s in samples]
    assert all(s["bin"] == bytes([int(s["__key__"][1:]) % 256]) * 1000 for s in out)


def test_order_looks_uniform():
    counts = collections.Counter()
    data = [{"__key__": str(i), "x": b""} for i in range(4)]
    for seed in range(2000):
        counts[tuple(s["__key__"] for s in shuffle.shuffled(data, seed, memory=1 << 20))] += 1
    assert len(counts) == 24 and min(counts.values()) > 40  # every permutation, none rare (mean 83)


def test_keeps_keys_with_dots_and_odd_fields(inputs):
    with TarWriter(str(inputs / "odd.tar"), encoder=False, keep_meta=True) as sink:
        for i in range(30):
            sink.write({"__key__": f"dir/x{i}", "seg.png": b"p" * i, "_meta.json": b"{}", "__weird": b"w"})
    assert ("dir/x0._meta.json", b"{}") in members("odd.tar")
    assert run_cli("shuffle", "odd.tar", "--memory", "4K", "--buckets", "3", "-o", "odd-out.tar") == 0
    assert sorted(members("odd-out.tar")) == sorted(members("odd.tar"))


def test_stdin_and_shards_output(inputs, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((inputs / "dataset.tar").read_bytes())))
    assert run_cli("shuffle", "-", "--memory", "8K", "-o", "sh-%02d.tar", "--maxcount", "8") == 0
    got = [k for i in range(3) for k in keys(inputs / f"sh-{i:02d}.tar")]
    assert sorted(got) == keys("dataset.tar")
    assert run_cli("shuffle", "dataset.tar", "-o", "whole.tar") == 0
    assert keys("whole.tar") == got  # the order does not depend on --memory or the output's shape
