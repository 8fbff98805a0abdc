"""IndexedDataset: the same samples as streaming, at random; views, decoding, pickling, DataLoader workers."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from shardstream import testing
from shardstream.codecs import Decoder
from shardstream.errors import ConfigError, DecodeError
from shardstream.indexed import (
    DistributedLocalitySampler,
    IndexedDataset,
    LocalitySampler,
    index_dataset,
    index_shard,
)


@pytest.fixture
def dataset(write_shards, tmp_path):
    paths = write_shards(23, 5)
    index_dataset(paths, tmp_path / "ds.json")
    return IndexedDataset(str(tmp_path / "ds.json")), paths


def test_every_sample_equals_the_streamed_one(dataset, streamed):
    ds, paths = dataset
    reference = streamed(paths)
    assert len(ds) == len(reference) == 23
    order = np.random.default_rng(0).permutation(len(ds))
    for i in order:
        assert ds[int(i)] == reference[i]
    assert list(ds) == reference
    assert ds[-1] == reference[-1] and ds[np.int64(3)] == reference[3]
    for bad in (23, -24):
        with pytest.raises(IndexError, match="out of range for a dataset of 23 samples"):
            ds[bad]
    with pytest.raises(TypeError, match="integers or slices"):
        ds["k0001"]


def test_a_batch_of_indices_reads_what_single_indexing_reads(dataset):
    ds, _ = dataset
    picks = [22, 0, 5, 5, -1, np.int64(7), 13]
    assert ds.__getitems__(picks) == [ds[i] for i in picks]
    view = ds[3:20:2].decode()
    assert view.__getitems__([0, 8, -2]) == [view[0], view[8], view[-2]]
    with pytest.raises(IndexError, match="out of range for a dataset of 23 samples"):
        ds.__getitems__([1, 23])
    with pytest.raises(TypeError, match="integers"):
        ds.__getitems__(["k0001"])


def test_get_by_key(dataset):
    ds, _ = dataset
    assert ds.get("k0017") == ds[17]
    with pytest.raises(KeyError):
        ds.get("nope")
    view = ds[5:10]
    assert view.get("k0007")["__key__"] == "k0007"
    with pytest.raises(KeyError):
        view.get("k0011")


def test_slices_are_views(dataset, streamed):
    ds, paths = dataset
    reference = streamed(paths)
    for cut in (slice(10, 20), slice(None, None, 3), slice(None, None, -2), slice(-4, None), slice(7, 3)):
        view = ds[cut]
        assert isinstance(view, IndexedDataset) and list(view) == reference[cut]
    assert list(ds[2:20][::4][1:]) == reference[2:20][::4][1:]
    assert ds[4:19].shard_lengths == [1, 5, 5, 4] and ds[::-1].shard_lengths == [3, 5, 5, 5, 5]
    assert ds.shard_lengths == [5, 5, 5, 5, 3] and ds[3:3].shard_lengths == []


def test_zero_copy_gives_the_same_bytes(dataset, tmp_path):
    ds, paths = dataset
    zero = IndexedDataset(str(tmp_path / "ds.json"), zero_copy=True)
    for i in range(len(ds)):
        got = zero[i]
        assert all(isinstance(v, memoryview) for k, v in got.items() if not k.startswith("__"))
        assert {k: (bytes(v) if isinstance(v, memoryview) else v) for k, v in got.items()} == ds[i]
    kept = zero[3]["bin"]
    zero.close()  # views handed out stay valid
    assert bytes(kept) == ds[3]["bin"]
    assert zero.decode()[3]["cls"] == 3


def test_decoding_and_transforms(dataset, streamed, tmp_path):
    ds, paths = dataset
    reference = streamed(paths)
    decoded = IndexedDataset(str(tmp_path / "ds.json"), decode=True, transform=lambda s: (s["cls"], s["txt"]))
    assert decoded[8] == (8 % 10, "text 8 " * (8 % 7))
    assert ds.decode()[8] == Decoder()(reference[8])
    assert ds.map(lambda s: s["__key__"])[2] == "k0002"
    assert ds[4:8].decode().map(lambda s: s["cls"])[0] == 4

    def boom(s):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError) as info:
        ds.map(boom)[1]
    assert any("k0001" in note for note in info.value.__notes__)
    with pytest.raises(DecodeError, match="k0002"):
        ds.map(lambda s: {**s, "json": b"{not json"}).decode()[2]
    with pytest.raises(ConfigError):
        IndexedDataset(str(tmp_path / "ds.json"), decode=3)


def test_images_decode_with_the_codec_table(tmp_path):
    fields = {"png": lambda shard, index, i: np.full((4, 5, 3), i, np.uint8), "cls": lambda shard, index, i: i}
    testing.write_shards(tmp_path, [3], fields, name="img.tar", key="i{index}", index=True)
    image = IndexedDataset(str(tmp_path / "img.tar"), decode="rgb8")[2]["png"]
    assert image.shape == (4, 5, 3) and image.dtype == np.uint8 and int(image[0, 0, 0]) == 2


def test_shard_lists_and_empty_shards(tmp_path, write_shards, streamed):
    paths = write_shards(7, 3)
    testing.write_shards(tmp_path, [0], name="empty.tar")
    shards = [paths[0], str(tmp_path / "empty.tar"), *paths[1:]]
    for shard in shards:
        index_shard(shard)
    ds = IndexedDataset(shards)
    assert [s["__key__"] for s in ds] == [f"k{i:04d}" for i in range(7)]
    assert ds.shard_lengths == [3, 3, 1] and IndexedDataset(paths[0])[2] == streamed(paths[:1])[2]
    with pytest.raises(ConfigError):
        IndexedDataset([])


def test_pickles_are_small_and_reopen(dataset):
    ds, _ = dataset
    ds.get("k0020")  # loads every shard index and opens a map
    blob = pickle.dumps(ds[1:])
    assert len(blob) < 4096
    again = pickle.loads(blob)
    assert again[0] == ds[1] and len(again) == 22
    ds._handles.pid = -1  # as seen from a forked child: reopen instead of using the parent's maps
    assert ds[22] == again[21] and ds._handles.pid == os.getpid()


def test_dataloader_workers_see_every_sample_once(dataset):
    torch = pytest.importorskip("torch")
    ds, _ = dataset
    sampler = LocalitySampler(ds, window=2, seed=3)
    loader = torch.utils.data.DataLoader(ds, sampler=sampler, num_workers=2, batch_size=4,
                                         collate_fn=lambda batch: [s["__key__"] for s in batch])  # fmt: skip
    keys = [key for batch in loader for key in batch]
    assert sorted(keys) == [f"k{i:04d}" for i in range(23)]
    ranks = [DistributedLocalitySampler(ds, num_replicas=3, rank=r, window=2, seed=3) for r in range(3)]
    shares = [[ds[i]["__key__"] for i in r] for r in ranks]
    assert [len(s) for s in shares] == [8, 8, 8] and set(sum(shares, [])) == set(keys)


def test_verify_can_be_turned_off(dataset, streamed, tmp_path):
    ds, paths = dataset
    with open(paths[0], "ab") as f:
        f.write(bytes(512))
    lax = IndexedDataset(str(tmp_path / "ds.json"), verify=False)
    assert lax[0] == streamed(paths)[0]
    assert "IndexedDataset" in repr(lax) and "samples=23" in repr(lax)



@pytest.mark.parametrize("cut", [slice(None), slice(3, 17), slice(None, None, 3), slice(None, None, -2),
                                 slice(20, 2, -4), slice(7, 3), slice(-1, None)])
def test_shard_spans_cover_the_view_in_order(dataset, cut):
    ds, _ = dataset
    view = ds[cut]
    spans = list(view.shard_spans())
    assert [shard.sample(i)["__key__"] for shard, rows in spans for i in rows] == [s["__key__"] for s in view]
    assert [len(rows) for _, rows in spans] == view.shard_lengths
