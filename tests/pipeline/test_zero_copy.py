"""``tarfile_to_samples(zero_copy=True)`` / ``WebDataset(zero_copy=True)``: uncompressed local shards read in place.

Fields are read-only memoryviews into a memory-mapped shard; everything else (samples, order, errors, handlers,
decoding, resuming) is what the copying path gives. (The member walk itself is checked against the copying one
on every reader test in tests/tar and on every archive of tests/test_iter_samples.py.)
"""

from __future__ import annotations

import gc
import gzip
import io
import pickle
import tarfile

import numpy as np
import pytest

import shardstream as wds
from shardstream.codecs import Decoder
from shardstream.errors import TarFormatError
from shardstream.testing import assert_checkpoint_conformance, write_shards

from pipeline_data import write_tar


def as_bytes(sample):
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in sample.items()}


def fields(sample):
    return [v for k, v in sample.items() if not k.startswith("__")]


@pytest.fixture
def pax_shard(tmp_path):
    """A PAX shard with long and non-ASCII names (extended headers before members) and a large member."""
    path = tmp_path / "pax.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for i in range(6):
            key = ("d" * 120 if i % 2 else "é") + f"/s{i}"
            for ext, data in (("txt", f"text {i}".encode()), ("bin", bytes([i]) * (1 << 20 if i == 3 else 700))):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return str(path)


def test_same_samples_as_the_copying_path(pax_shard, make_shards):
    for urls in ([pax_shard], make_shards(3, 4)):
        copied = list(wds.WebDataset(urls, shardshuffle=False))
        viewed = list(wds.WebDataset(urls, shardshuffle=False, zero_copy=True))
        assert [as_bytes(s) for s in viewed] == copied
        assert [list(s) for s in viewed] == [list(s) for s in copied]
        assert all(isinstance(v, memoryview) and v.readonly for s in viewed for v in fields(s))


def test_views_stay_valid_after_the_dataset_is_gone(make_shards):
    urls = make_shards(2, 3)
    samples = list(wds.WebDataset(urls, shardshuffle=False, zero_copy=True))
    gc.collect()
    assert bytes(samples[-1]["txt"]) == b"text 1 2"
    assert [bytes(s["cls"]) for s in samples] == [b"0", b"1", b"2", b"3", b"4", b"5"]


def test_select_and_rename_files(pax_shard):
    kw = dict(shardshuffle=False, select_files=lambda n: n.endswith(".txt"), rename_files=lambda n: "r/" + n)
    copied = list(wds.WebDataset([pax_shard], **kw))
    viewed = list(wds.WebDataset([pax_shard], zero_copy=True, **kw))
    assert [as_bytes(s) for s in viewed] == copied and len(copied) == 6
    assert all(isinstance(v, memoryview) for s in viewed for v in fields(s))


def test_decoding_views(tmp_path):
    image = np.arange(24 * 32 * 3, dtype=np.uint8).reshape(24, 32, 3)
    (url,) = write_shards(tmp_path, [4], lambda s, i, n: {"txt": f"t{i}", "cls": i, "json": {"i": i}, "png": image + i,
                                                          "npy": np.full(3, i), "bin": b"\x00raw"},
                          name="d.tar", key="k{index}")
    for spec in ((), ("rgb8",), ("pil",)):
        copied = list(wds.WebDataset(url, shardshuffle=False).decode(*spec))
        viewed = list(wds.WebDataset(url, shardshuffle=False, zero_copy=True).decode(*spec))
        for a, b in zip(copied, viewed, strict=True):
            assert a.keys() == b.keys()
            for k in a:
                if isinstance(a[k], np.ndarray):
                    assert np.array_equal(a[k], b[k])
                elif spec == ("pil",) and k == "png":
                    assert np.array_equal(np.asarray(a[k]), np.asarray(b[k]))
                else:
                    assert a[k] == b[k], k
    assert viewed[2]["txt"] == "t2" and viewed[2]["cls"] == 2 and viewed[2]["json"] == {"i": 2}
    assert viewed[2]["bin"] == b"\x00raw" and type(viewed[2]["bin"]) is bytes  # undecoded fields come back as bytes
    columns = {"__key__": ["a", "b"], "cls": [memoryview(b"1"), memoryview(b"2")], "txt": [memoryview(b"x")] * 2}
    assert Decoder().decode_columns(columns) == {"__key__": ["a", "b"], "cls": [1, 2], "txt": ["x", "x"]}


def test_compressed_and_non_file_shards_are_copied(tmp_path, make_shards):
    plain = make_shards(1, 3)[0]
    with open(plain, "rb") as f:
        data = f.read()
    gz = tmp_path / "c.tar.gz"
    gz.write_bytes(gzip.compress(data))
    copied = [{k: v for k, v in s.items() if k != "__local_path__"} for s in wds.WebDataset(plain, shardshuffle=False)]
    for url in (str(gz), f"pipe:cat {plain}"):
        got = list(wds.WebDataset(url, shardshuffle=False, zero_copy=True))
        assert [{**{k: v for k, v in s.items() if k != "__local_path__"}, "__url__": plain} for s in got] == copied
        assert all(type(v) is bytes for s in got for v in fields(s))


def truncated(tmp_path, make_shards, cut: int):
    good = make_shards(1, 4)[0]
    with open(good, "rb") as f:
        data = f.read()
    bad = tmp_path / "bad.tar"
    bad.write_bytes(data[:cut])
    return [str(bad), good]


@pytest.mark.parametrize("cut", [700, 2048 + 512 + 3, 4096 + 100])
def test_truncated_shards_raise_and_handlers_behave_the_same(tmp_path, make_shards, cut):
    urls = truncated(tmp_path, make_shards, cut)
    for zero_copy in (False, True):
        with pytest.raises(TarFormatError) as info:
            list(wds.WebDataset(urls, shardshuffle=False, zero_copy=zero_copy))
        assert info.value.url == urls[0]
    for handler in (wds.ignore_and_continue, wds.ignore_and_stop):
        copied = list(wds.WebDataset(urls, shardshuffle=False, handler=handler, empty_check=False))
        viewed = list(wds.WebDataset(urls, shardshuffle=False, handler=handler, empty_check=False, zero_copy=True))
        assert [as_bytes(s) for s in viewed] == copied
    with pytest.warns(UserWarning):
        viewed = list(wds.WebDataset(urls, shardshuffle=False, handler=wds.warn_and_continue, zero_copy=True))
    assert [s["__key__"] for s in viewed][-4:] == ["s0-000", "s0-001", "s0-002", "s0-003"]


def test_empty_file_is_reported_like_the_copying_path(tmp_path):
    empty = write_tar(tmp_path / "e.tar", [])
    (tmp_path / "zero.tar").write_bytes(b"")
    for url in (empty, str(tmp_path / "zero.tar")):
        outcomes = []
        for zero_copy in (False, True):
            try:
                outcomes.append(list(wds.tarfile_to_samples(zero_copy=zero_copy)([url])))
            except TarFormatError as e:
                outcomes.append(str(e))
        assert outcomes[0] == outcomes[1]


def test_resumes_like_the_copying_path(make_shards):
    urls = make_shards(3, 4)

    def make():
        return wds.WebDataset(urls, shardshuffle=False, zero_copy=True).map(as_bytes)

    first = assert_checkpoint_conformance(make, points=[0, 1, 5, 11])
    assert first == list(wds.WebDataset(urls, shardshuffle=False))


def test_views_do_not_pickle_but_their_copies_do(make_shards):
    sample = next(iter(wds.WebDataset(make_shards(1, 1), shardshuffle=False, zero_copy=True)))
    with pytest.raises(TypeError):
        pickle.dumps(sample)
    assert pickle.loads(pickle.dumps(as_bytes(sample)))["txt"] == b"text 0 0"


def test_encode_accepts_views(tmp_path, make_shards):
    """Samples read in place can be written straight back (shard rewriting, the CLI's shuffle/split)."""
    out = tmp_path / "copy.tar"
    with wds.TarWriter(str(out)) as sink:
        for sample in wds.WebDataset(make_shards(1, 3), shardshuffle=False, zero_copy=True):
            sink.write(sample)
    assert [s["txt"] for s in wds.WebDataset(str(out), shardshuffle=False)] == [b"text 0 0", b"text 0 1", b"text 0 2"]
