"""Issue 18, items 9 and 6: malformed dataset indexes and corrupt sidecar indexes raise StaleIndexError.

A dataset index that is not the expected object (``[]``, ``null``, negative counts...) names the file and what is
wrong; a sidecar whose header still matches the shard (size and fingerprint) but whose arrays are corrupt is
refused on load, never answers with other bytes, ``IndexError`` or ``RecursionError``.
"""

from __future__ import annotations

import json
import pathlib
import struct

import pytest

from shardstream.errors import StaleIndexError
from shardstream.indexed import DatasetIndex, IndexedDataset, ShardIndex, index_dataset
from shardstream.indexed.shardindex import _PREFIX
from shardstream.testing import write_shards


@pytest.fixture
def dataset(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> tuple[pathlib.Path, list[str]]:
    monkeypatch.chdir(tmp_path)
    fields = {"txt": lambda shard, index, i: f"text {i}" * (i + 1), "cls": lambda shard, index, i: i}
    shards = write_shards(tmp_path, [4, 4, 2], fields, name="ds-{shard:03d}.tar", key="s{number}", index=True)
    index_dataset(shards, "ds.json")
    return tmp_path / "ds.json", shards


def _with(doc: dict, path: list, value) -> dict:
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


BAD_DOCUMENTS = [
    ("[]", "JSON list, not an object"),
    ("null", "JSON NoneType"),
    ('"text"', "JSON str"),
    ("[" * 100000 + "]" * 100000, "unreadable"),
]
BAD_FIELDS = [
    (["shards", 0, "samples"], -1, "'samples' is -1"),
    (["shards", 0, "samples"], "4", "'samples' is '4'"),
    (["shards", 0, "samples"], 2.5, "not a count"),
    (["shards", 0, "size"], True, "'size' is True"),
    (["shards", 0, "url"], None, "'url' is None"),
    (["shards", 0, "url"], "", "not a non-empty string"),
    (["shards", 0, "fingerprint"], 7, "'fingerprint'"),
    (["shards", 0], [], "shard 0 is a JSON list"),
    (["shards"], {"a": 1}, "'shards' is dict"),
    (["shards"], None, "'shards' is NoneType"),
    (["samples"], 3, "'samples' is 3 but the shards hold 10"),
    (["samples"], -10, "'samples' is -10"),
    (["rule"], None, "'rule' must be a string"),
    (["lowercase"], "yes", "'lowercase'"),
]


@pytest.mark.parametrize("text, problem", BAD_DOCUMENTS)
def test_malformed_dataset_index_documents(dataset, text, problem):
    path, _ = dataset
    path.write_text(text)
    with pytest.raises(StaleIndexError, match="unreadable") as info:
        DatasetIndex.load(path)
    assert str(path) in str(info.value) and problem in str(info.value)
    assert "index_dataset" in str(info.value)


@pytest.mark.parametrize("where, value, problem", BAD_FIELDS)
def test_malformed_dataset_index_fields(dataset, where, value, problem):
    path, _ = dataset
    path.write_text(json.dumps(_with(json.loads(path.read_text()), where, value)))
    with pytest.raises(StaleIndexError) as info:
        IndexedDataset(str(path))
    assert str(path) in str(info.value) and problem in str(info.value)


def test_a_missing_field_is_named(dataset):
    path, _ = dataset
    doc = json.loads(path.read_text())
    del doc["shards"][1]["index"]
    path.write_text(json.dumps(doc))
    with pytest.raises(StaleIndexError, match="shard 1: 'index' is None"):
        DatasetIndex.load(path)


# -- sidecar indexes whose header still matches the shard --------------------------------------------------


def _sidecar(shard: str) -> tuple[dict, bytearray, int]:
    data = bytearray(pathlib.Path(shard + ".ssidx").read_bytes())
    _, _, length = _PREFIX.unpack_from(data, 0)
    return json.loads(bytes(data[_PREFIX.size:_PREFIX.size + length])), data, _PREFIX.size + length


def _corrupt(shard: str, how: str) -> None:
    header, data, pos = _sidecar(shard)
    members, samples = header["members"], header["samples"]
    offsets, sizes = pos, pos + 8 * members
    starts = sizes + 8 * members
    key_ends = starts + 4 * (samples + 1)
    ext_ids = key_ends + 4 * (samples + 1)
    if how == "offset past the end":
        struct.pack_into("<Q", data, offsets + 8 * (members - 1), header["size"] + 100)
    elif how == "size past the end":
        struct.pack_into("<Q", data, sizes, 1 << 40)
    elif how == "offset wraps around":
        struct.pack_into("<Q", data, offsets, (1 << 64) - 8)
    elif how == "offsets out of order":
        first, second = struct.unpack_from("<QQ", data, offsets)
        struct.pack_into("<QQ", data, offsets, second, first)
    elif how == "starts decrease":
        struct.pack_into("<I", data, starts + 4, 100)
    elif how == "starts past the members":
        struct.pack_into("<I", data, starts + 4 * samples, members + 5)
    elif how == "key ends decrease":
        struct.pack_into("<I", data, key_ends + 4, 1000)
    elif how == "extension number too big":
        struct.pack_into("<I", data, ext_ids, 99)
    elif how == "truncated":
        del data[len(data) - 20:]
    elif how == "huge member count":
        header["members"] = 1 << 31
    elif how == "negative sample count":
        header["samples"] = -1
    if how in ("huge member count", "negative sample count", "nested header"):
        text = json.dumps(header).encode() if how != "nested header" else (
            b'{"extensions": ' + b"[" * 50000 + b"]" * 50000 + b"}")
        data = bytearray(_PREFIX.pack(b"SSIDX\n", 1, len(text))) + text + data[pos:]
    pathlib.Path(shard + ".ssidx").write_bytes(bytes(data))


CORRUPTIONS = ["offset past the end", "size past the end", "offset wraps around", "offsets out of order",
               "starts decrease", "starts past the members", "key ends decrease", "extension number too big",
               "truncated", "huge member count", "negative sample count", "nested header"]


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_corrupt_sidecar_with_a_matching_fingerprint_is_refused(dataset, how):
    path, shards = dataset
    _corrupt(shards[1], how)
    with pytest.raises(StaleIndexError, match="unreadable") as info:
        ShardIndex.load(shards[1])
    assert shards[1] in str(info.value) and "index_shard" in str(info.value)
    ds = IndexedDataset(str(path))
    with pytest.raises(StaleIndexError):
        for i in range(len(ds)):
            ds[i]


def test_an_intact_sidecar_still_loads_and_reads_the_same_bytes(dataset):
    path, shards = dataset
    ds = IndexedDataset(str(path))
    assert [ds[i]["txt"] for i in range(len(ds))] == [f"text {i}".encode() * (i + 1) for i in range(10)]
