"""Sidecar indexes: built by scanning or while writing (the same), file format, freshness, typed errors."""

from __future__ import annotations

import json
import os
import struct

import pytest

from shardstream.errors import (
    ConfigError,
    DuplicateFieldError,
    InterleavedKeyError,
    MissingExtensionError,
    OpenError,
    StaleIndexError,
)
from shardstream.indexed import (
    IndexedDataset,
    LocalSource,
    ShardIndex,
    index_shard,
    indexed_shard_writer,
    sidecar_path,
    write_indexes,
)
from shardstream.indexed import build
from shardstream.samples import KeyRule, SampleStats
from shardstream.tar.writer import TarStreamWriter
from shardstream.writer import ShardWriter, TarWriter

TRICKY_KEYS = ["plain", "dir/sub/x", "a.b", "d/" + "long" * 40, "ünï/cödé", "UPPER"]


def check_against_stream(index: ShardIndex, path: str, streamed, rule=None) -> None:
    """Every sample of the index reads back exactly as streaming reads it."""
    data = open(path, "rb").read()
    reference = streamed([path], rule)
    assert len(index) == len(reference)
    for i, want in enumerate(reference):
        assert index.key(i) == want["__key__"]
        got = {ext: data[offset : offset + size] for ext, offset, size in index.members(i)}
        assert got == {k: v for k, v in want.items() if not k.startswith("__")}


def test_index_shard_reads_like_streaming(write_shards, streamed):
    for path in write_shards():
        index = index_shard(path)
        check_against_stream(index, path, streamed)
        assert os.path.exists(sidecar_path(path)) and ShardIndex.load(path) == index


@pytest.mark.parametrize("rule", [None, "last-dot", KeyRule(lowercase=False)])
def test_index_while_writing_equals_index_by_scanning(tmp_path, rule, streamed):
    posted = []
    with indexed_shard_writer(str(tmp_path / "w-%02d.tar"), maxcount=4, rule=rule, post=posted.append) as sink:
        for n, key in enumerate(TRICKY_KEYS * 2):
            sink.write({"__key__": f"{key}{n}", "txt": "t" * n, "Seg.PNG": b"p" * 700, "json": {"n": n}})
    assert posted == sink.shards and len(sink.shards) == 3
    for path in sink.shards:
        written = ShardIndex.load(path)
        assert written == index_shard(path, save=False, rule=rule)
        check_against_stream(written, path, streamed, rule)
    assert sink.index_entries == {}  # the hook took them: memory stays bounded


def test_write_indexes_after_a_plain_shard_writer(tmp_path, make_sample):
    with ShardWriter(str(tmp_path / "p-%02d.tar"), maxcount=3, record_index=True) as sink:
        for i in range(7):
            sink.write(make_sample(i))
    assert write_indexes(sink) == [sidecar_path(p) for p in sink.shards]
    for path in sink.shards:
        assert ShardIndex.load(path) == index_shard(path, save=False)
    with pytest.raises(ConfigError, match="record_index=True"):
        write_indexes(ShardWriter(str(tmp_path / "q-%02d.tar")))


def test_fast_path_equals_group_samples(write_shards, monkeypatch):
    paths = write_shards(12, 4)
    fast = [index_shard(p, save=False) for p in paths]
    monkeypatch.setattr(build, "_fast_arrays", lambda entries, split: None)
    assert fast == [index_shard(p, save=False) for p in paths]


def test_sidecar_file_format(write_shards):
    path = write_shards(6, 10)[0]
    index_shard(path)
    raw = open(sidecar_path(path), "rb").read()
    magic, version, length = struct.unpack_from("<6sHI", raw)
    assert (magic, version) == (b"SSIDX\n", 1) and (12 + length) % 8 == 0
    header = json.loads(raw[12 : 12 + length])
    assert header["format"] == "shardstream-shard-index" and header["samples"] == 6
    assert header["size"] == os.path.getsize(path) and len(header["fingerprint"]) == 32
    assert (header["rule"], header["lowercase"]) == ("first-dot", True)
    assert sorted(header["extensions"]) == ["bin", "cls", "txt"]
    members = header["members"]
    assert len(raw) == 12 + length + 16 * members + 4 * (2 * 7 + members) + sum(len(f"k{i:04d}") for i in range(6))


def test_changed_shard_is_detected_and_names_the_rebuild(tmp_path, write_shards, make_sample):
    path = write_shards(5, 5)[0]
    index_shard(path)
    original = open(path, "rb").read()

    def stale_error():
        with pytest.raises(StaleIndexError) as info:
            IndexedDataset(path)[0]
        message = str(info.value)
        assert info.value.url == path and path in message
        assert f"shardstream.indexed.index_shard({path!r})" in message and f"`shardstream index {path}`" in message
        return message

    with open(path, "ab") as f:  # appended to
        f.write(bytes(10240))
    assert "size changed" in stale_error()
    tail = bytearray(original)  # same size, other bytes near the end
    tail[-10240 - 3] ^= 1
    open(path, "wb").write(bytes(tail))
    assert "content changed" in stale_error()
    with TarWriter(path) as sink:  # rewritten with other samples (renamed into place, as writers do)
        for i in range(5):
            sink.write({**make_sample(i), "txt": "other"})
    stale_error()
    index_shard(path)
    assert IndexedDataset(path)[0]["txt"] == b"other"


def test_unreadable_and_missing_sidecars(write_shards):
    path = write_shards(3, 3)[0]
    with pytest.raises(OpenError, match=r"has no index .*index_shard") as info:
        ShardIndex.load(path)
    assert info.value.url == path
    index_shard(path)
    data = open(sidecar_path(path), "rb").read()
    for broken in (data[:-3], b"garbage" + data[7:], data[:30]):
        open(sidecar_path(path), "wb").write(broken)
        with pytest.raises(StaleIndexError, match=r"unreadable .*index_shard"):
            ShardIndex.load(path)


def test_check_accepts_a_copy(tmp_path, write_shards):
    path = write_shards(4, 4)[0]
    index = index_shard(path)
    copy = tmp_path / "copy.tar"
    copy.write_bytes(open(path, "rb").read())  # a copy has a new mtime: still fresh
    with LocalSource(copy) as source:
        index.check(source)


def ill_formed(tmp_path, name: str, members: list[tuple[str, bytes]]) -> str:
    path = str(tmp_path / name)
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        for member, data in members:
            tw.add(member, data)
    return path


@pytest.mark.parametrize(
    "members, error",
    [
        ([("a.txt", b"1"), ("a.txt", b"2"), ("b.txt", b"3")], DuplicateFieldError),
        ([("a.txt", b"1"), ("b.txt", b"2"), ("a.cls", b"3"), ("c.txt", b"4")], InterleavedKeyError),
        ([("a.txt", b"1"), ("README", b"2"), ("b.txt", b"3")], MissingExtensionError),
    ],
)
def test_ill_formed_samples_raise_as_in_streaming(tmp_path, members, error, streamed):
    path = ill_formed(tmp_path, "bad.tar", members)
    with pytest.raises(error) as scanned:
        index_shard(path)
    with pytest.raises(error) as streaming:
        streamed([path])
    assert str(scanned.value) == str(streaming.value)
    stats = SampleStats()
    skipped = index_shard(path, save=False, handler=lambda e: True)
    reference = streamed_with_handler(path, stats)
    assert skipped.keys() == [s["__key__"] for s in reference] and stats.skipped_members


def streamed_with_handler(path: str, stats: SampleStats) -> list[dict]:
    from shardstream.samples import group_samples
    from shardstream.tar import iter_tar

    with open(path, "rb") as f:
        return list(group_samples(iter_tar(f, path), path, handler=lambda e: True, stats=stats))


def test_compressed_shards_cannot_be_indexed(tmp_path, make_sample):
    with TarWriter(str(tmp_path / "c.tar.gz")) as sink:
        sink.write(make_sample(1))
    with pytest.raises(ConfigError, match=r"gzip-compressed.*cannot be indexed.*plain .tar"):
        index_shard(str(tmp_path / "c.tar.gz"))
    with pytest.raises(ConfigError, match="cannot be compressed"):
        indexed_shard_writer(str(tmp_path / "c-%02d.tar"), compress="gz")
    with pytest.raises(ConfigError, match="gzip-compressed"):
        with indexed_shard_writer(str(tmp_path / "c-%02d.tar.gz")) as sink:
            sink.write(make_sample(1))


def test_remote_shards_need_a_registered_source():
    with pytest.raises(ConfigError, match="needs a local shard"):
        index_shard("s3://bucket/a.tar")
    with pytest.raises(ConfigError, match="register_source"):
        IndexedDataset("gs://bucket/a.tar")
