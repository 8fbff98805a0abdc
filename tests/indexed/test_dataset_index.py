"""The dataset index: one JSON file for a dataset, relative paths, sidecars reused or rebuilt, staleness caught."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from shardstream.errors import StaleIndexError
from shardstream.indexed import DatasetIndex, IndexedDataset, ShardIndex, index_dataset, index_shard, sidecar_path
from shardstream.indexed import dataset_index
from shardstream.writer import TarWriter


def test_paths_are_relative_and_the_dataset_moves(tmp_path, write_shards):
    paths = write_shards(11, 4)
    (tmp_path / "meta").mkdir()
    result = index_dataset(paths, tmp_path / "meta" / "train.json")
    assert len(result) == 11 and result.path == str(tmp_path / "meta" / "train.json")
    doc = json.loads((tmp_path / "meta" / "train.json").read_text())
    assert doc["format"] == "shardstream-dataset-index" and doc["samples"] == 11
    assert [s["url"] for s in doc["shards"]] == [f"../ds-{n:03d}.tar" for n in range(3)]
    assert [s["index"] for s in doc["shards"]] == [f"../ds-{n:03d}.tar.ssidx" for n in range(3)]
    assert [s["samples"] for s in doc["shards"]] == [4, 4, 3]
    before = [IndexedDataset(str(tmp_path / "meta" / "train.json"))[i] for i in (0, 10)]
    moved = tmp_path.parent / (tmp_path.name + "-moved")
    shutil.copytree(tmp_path, moved)
    ds = IndexedDataset(str(moved / "meta" / "train.json"))
    after = [ds[i] for i in (0, 10)]
    assert [{**s, "__url__": None} for s in after] == [{**s, "__url__": None} for s in before]
    assert after[0]["__url__"] == os.path.normpath(str(moved / "ds-000.tar"))
    assert len(DatasetIndex.load(f"file://{moved}/meta/train.json")) == 11


def test_fresh_sidecars_are_reused_and_stale_ones_rebuilt(tmp_path, write_shards, monkeypatch):
    paths = write_shards(9, 3)
    index_dataset(paths, tmp_path / "a.json")
    built = []
    original = dataset_index.build.index_shard  # the module that builds indexes, loaded when one is built
    monkeypatch.setattr(dataset_index.build, "index_shard", lambda shard, **kw: built.append(shard) or original(shard, **kw))
    index_dataset(paths, tmp_path / "b.json")
    assert built == []
    with TarWriter(paths[1]) as sink:
        sink.write({"__key__": "new", "txt": "changed"})
    index_dataset(paths, tmp_path / "c.json")
    assert built == [paths[1]]
    index_dataset(paths, tmp_path / "d.json", rule="last-dot")
    assert built == [paths[1], *paths]
    index_dataset(paths, tmp_path / "e.json", rule="last-dot", rebuild=True)
    assert len(built) == 7


def test_a_stale_dataset_index_is_caught(tmp_path, write_shards):
    paths = write_shards(9, 3)
    index_dataset(paths, tmp_path / "ds.json")
    with TarWriter(paths[2]) as sink:
        sink.write({"__key__": "other", "txt": "x"})
    index_shard(paths[2])  # the sidecar is fresh again, the dataset index is not
    ds = IndexedDataset(str(tmp_path / "ds.json"))
    assert ds[0]["__key__"] == "k0000"
    with pytest.raises(StaleIndexError, match=r"does not match the index .*index_dataset") as info:
        ds[7]
    assert info.value.url == paths[2]


def test_rules_must_agree(tmp_path, write_shards):
    paths = write_shards(4, 2)
    index_dataset(paths, tmp_path / "ds.json")
    assert len(IndexedDataset(str(tmp_path / "ds.json"), rule="first-dot")) == 4
    with pytest.raises(StaleIndexError, match="key rule 'first-dot'"):
        IndexedDataset(str(tmp_path / "ds.json"), rule="last-dot")
    with pytest.raises(StaleIndexError, match=r"key rule 'first-dot'.*index_shard"):
        IndexedDataset(paths, rule="last-dot")
    assert ShardIndex.load(paths[0]).rule == "first-dot" and os.path.exists(sidecar_path(paths[0]))


def test_unreadable_dataset_index(tmp_path):
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(StaleIndexError, match="unreadable"):
        IndexedDataset(str(tmp_path / "bad.json"))
