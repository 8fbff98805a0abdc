"""Interleaved multimodal documents: written as one sample, read back in order, collated with masks."""

from __future__ import annotations

import numpy as np
import pytest

import shardstream as wds
from shardstream.errors import ConfigError, SampleFormatError
from shardstream.interleaved import collate_interleaved, decode_interleaved, interleaved_sample
from shardstream.testing import write_shards


def image(value, shape=(6, 5, 3)):
    return np.full(shape, value, np.uint8)


DOCS = [
    ["intro", image(10), "middle", image(20), image(30), "end"],
    [image(40), "caption only"],
    ["no images at all"],
]


@pytest.fixture
def shards(tmp_path):
    def doc(shard, index, n):
        return interleaved_sample(f"doc{n}", DOCS[n], meta={"n": n}, image_format="png")

    return write_shards(tmp_path, [2, 1], doc, name="docs-{shard:02d}.tar")


def test_round_trip_keeps_order_and_values(shards):
    docs = [decode_interleaved(s) for s in wds.WebDataset(shards, shardshuffle=False)]
    for doc, original in zip(docs, DOCS):
        assert [k for k, _ in doc.items] == ["text" if isinstance(x, str) else "image" for x in original]
        for (kind, value), x in zip(doc.items, original):
            if kind == "text":
                assert value == x
            else:
                np.testing.assert_array_equal(value, x)
    assert [d.meta for d in docs] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_already_decoded_samples_are_used_as_they_are(shards):
    sample = next(iter(wds.WebDataset(shards, shardshuffle=False).decode("pil")))
    doc = decode_interleaved(sample)
    assert doc.images[0].size == (5, 6) and doc.texts == ["intro", "middle", "end"]


def test_member_layout(shards):
    import tarfile

    with tarfile.open(shards[0]) as tf:
        names = tf.getnames()
    assert sorted(names) == ["doc0.0.png", "doc0.1.png", "doc0.2.png", "doc0.json", "doc1.0.png", "doc1.json"]


def test_collate_pads_and_masks(shards):
    docs = [decode_interleaved(s) for s in wds.WebDataset(shards, shardshuffle=False)]
    batch = collate_interleaved(docs)
    assert batch["kinds"].tolist() == [[1, 2, 1, 2, 2, 1], [2, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]]
    assert batch["mask"].sum(1).tolist() == [6, 2, 1]
    assert batch["images"].shape == (3, 3, 6, 5, 3)
    assert batch["image_mask"].tolist() == [[True] * 3, [True, False, False], [False] * 3]
    assert batch["images"][1, 0, 0, 0, 0] == 40 and batch["images"][2].max() == 0
    assert batch["image_positions"] == [[1, 3, 4], [0], []] and batch["text_positions"][0] == [0, 2, 5]
    cut = collate_interleaved(docs, max_items=2)
    assert cut["kinds"].shape == (3, 2) and cut["images"].shape == (3, 1, 6, 5, 3)


def test_images_of_different_shapes_stay_lists():
    docs = [decode_interleaved({"__key__": "a", **{k: v for k, v in interleaved_sample(
        "a", [image(1, (2, 2, 3)), image(2, (3, 3, 3))]).items() if k != "__key__"}})]
    assert isinstance(collate_interleaved(docs)["images"], list)


def test_errors_name_the_sample_and_member():
    sample = interleaved_sample("d", ["t", b"bytes"])
    del sample["0.jpg"]
    with pytest.raises(SampleFormatError, match="'d.0.jpg'"):
        decode_interleaved(sample)
    with pytest.raises(SampleFormatError, match="d.json"):
        decode_interleaved({"__key__": "d", "txt": b"x"})
    with pytest.raises(SampleFormatError, match="one {kind: value}"):
        decode_interleaved({"__key__": "d", "json": {"interleaved": [{"text": "a", "image": "b"}]}})
    with pytest.raises(ConfigError, match="meta"):
        interleaved_sample("d", [], meta={"interleaved": 1})
    with pytest.raises(ConfigError, match="max_items"):
        collate_interleaved([], max_items=0)
