"""The ``floor`` contender of ``make bench-peers`` (benchmarks/peers/floor_walk.c) counts the samples the library
reads from the same shard, and refuses a header whose checksum is wrong: a floor that skipped work, or counted
something else, would make every "shardstream / floor" ratio of docs/performance.md a lie.
"""

from __future__ import annotations

import ctypes
import io
import os
import pathlib
import shutil
import subprocess

import pytest

from shardstream.samples import iter_samples
from shardstream.tar import TarStreamWriter

SOURCE = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "peers" / "floor_walk.c"


@pytest.fixture(scope="module")
def floor_walk(tmp_path_factory):
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (the floor contender is compiled by the benchmark)")
    lib = tmp_path_factory.mktemp("floor") / "floor_walk.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(lib), str(SOURCE)], check=True)
    walk = ctypes.CDLL(str(lib)).floor_walk
    walk.argtypes, walk.restype = [ctypes.c_char_p], ctypes.c_longlong
    return lambda path: walk(os.fsencode(path))


def shard(path: pathlib.Path, members: list[tuple[str, bytes]]) -> pathlib.Path:
    out = io.BytesIO()
    with TarStreamWriter(out) as tw:
        for name, data in members:
            tw.add(name, data)
    path.write_bytes(out.getvalue())
    return path


def test_floor_counts_the_samples_the_reader_reads(floor_walk, tmp_path):
    members = []
    for i in range(300):  # folders with dots, keys with several dots, empty and multi-block payloads
        key = f"dir.v{i % 3}/s{i:05d}" if i % 2 else f"s{i:05d}"
        members += [(f"{key}.txt", b"x" * (i * 7 % 1500)), (f"{key}.cls", b"%d" % i), (f"{key}.seg.png", b"")]
    path = shard(tmp_path / "a.tar", members)
    with open(path, "rb") as f:
        expected = sum(1 for _ in iter_samples(f, str(path)))
    assert expected == 300
    assert floor_walk(path) == expected


def test_floor_refuses_a_bad_checksum_and_a_missing_file(floor_walk, tmp_path):
    path = shard(tmp_path / "b.tar", [("k.txt", b"hello"), ("k.cls", b"1")])
    assert floor_walk(path) == 1
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01  # the first header's name: its checksum no longer matches
    path.write_bytes(bytes(data))
    assert floor_walk(path) == -1
    assert floor_walk(tmp_path / "missing.tar") == -1
