"""shardstream.testing.write_shards: the one helper the tests build their shards with."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from shardstream.errors import EncodeError
from shardstream.indexed import IndexedDataset, sidecar_path
from shardstream.pipeline import tarfile_samples
from shardstream.testing import write_shards
from shardstream.writer import TarWriter


def test_values_functions_and_format_strings(tmp_path):
    fields = {"txt": "same", "cls": lambda shard, index, number: number * 10}
    paths = write_shards(tmp_path / "new", [2, 0, 1], fields, name="p-{shard}.tar", key="{shard}/{index}-{number}")
    assert paths == [str(tmp_path / "new" / f"p-{n}.tar") for n in range(3)]
    samples = list(tarfile_samples(paths))
    assert [(s["__key__"], s["txt"], s["cls"]) for s in samples] == [
        ("0/0-0", b"same", b"0"), ("0/1-1", b"same", b"10"), ("2/0-2", b"same", b"20")]


def test_one_function_gives_the_whole_sample_and_its_key_wins(tmp_path):
    def sample(shard, index, number):
        return {"npy": np.full(2, number, np.int16), **({"__key__": f"own{number}"} if number % 2 else {})}

    (path,) = write_shards(tmp_path, [3], sample, key="k{number}")
    samples = list(tarfile_samples([path]))
    assert [s["__key__"] for s in samples] == ["k0", "own1", "k2"]
    assert [sorted(s) for s in samples] == [["__key__", "__url__", "npy"]] * 3


def test_bytes_as_they_are_with_encoder_false(tmp_path):
    (raw,) = write_shards(tmp_path, [1], {"json": "{'not json'", "png": b"\x89PNG"}, name="raw.tar", encoder=False)
    with TarWriter(str(tmp_path / "ref.tar"), encoder=False) as sink:
        sink.write({"__key__": "s0-000", "json": "{'not json'", "png": b"\x89PNG"})
    assert open(raw, "rb").read() == open(tmp_path / "ref.tar", "rb").read()
    with pytest.raises(EncodeError):
        write_shards(tmp_path, [1], {"cls": 3}, name="bad.tar", encoder=False)


def test_compressed_by_name_and_sidecar_indexes(tmp_path):
    (gz,) = write_shards(tmp_path, [2], name="c.tar.gz")
    with open(gz, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    assert [s["txt"] for s in tarfile_samples([gz])] == [b"text 0 0", b"text 0 1"]
    plain = write_shards(tmp_path, [3, 2], name="i-{shard}.tar", index=True)
    assert all(os.path.exists(sidecar_path(p)) for p in plain)
    assert not os.path.exists(sidecar_path(gz)) and gzip.decompress(open(gz, "rb").read())[:6] == b"s0-000"
    assert [s["__key__"] for s in IndexedDataset(plain)] == ["s0-000", "s0-001", "s0-002", "s1-000", "s1-001"]
