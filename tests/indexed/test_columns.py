"""IndexedDataset.columns(): the same batches as batching the decoded samples, and the native column step equal
to the codec table (the one definition) on valid and invalid data."""

from __future__ import annotations

import random

import numpy as np
import pytest

from shardstream import _native
from shardstream.codecs import CODECS, Decoder
from shardstream.errors import ConfigError, DecodeError
from shardstream.indexed import IndexedDataset, index_shard, indexed_shard_writer
from shardstream.reading_accel import CONVERSIONS
from shardstream.samples import ColumnBatches
from shardstream.tar import reader
from shardstream.writer import ShardWriter

_scan = _native.extension
native = pytest.mark.skipif(_scan is None or not hasattr(_scan, "slice_column"), reason="C extension not built")


@pytest.fixture(params=[True, False], ids=["native", "python"])
def accelerate(request, monkeypatch):
    if request.param and (_scan is None or not hasattr(_scan, "slice_column")):
        pytest.skip("C extension not built")
    monkeypatch.setattr(reader, "USE_ACCELERATOR", request.param)
    return request.param


def _reference(ds: IndexedDataset, batch_size: int, partial: bool = True) -> list[dict]:
    """Batching the samples iter(ds) gives (each decoded by the dataset's decoder) into columns."""
    batches, out = ColumnBatches(batch_size), []
    for sample in ds:
        done = batches.add(sample)
        if done is not None:
            out.append(done)
    last = batches.flush()
    if last is not None and partial:
        out.append(last)
    return out


def _write(tmp_path, samples, per_shard=7, name="c"):  # indexed_shard_writer's layout is what these tests read
    with indexed_shard_writer(str(tmp_path / f"{name}-%03d.tar"), maxcount=per_shard) as sink:
        for sample in samples:
            sink.write(sample)
    return sink.shards


def _captions(n, start=0):
    return [{"__key__": f"k{i:05d}", "txt": f"caption {i} é" * (i % 4), "cls": i % 13 - 3}
            for i in range(start, start + n)]  # fmt: skip


@pytest.mark.parametrize("batch_size", [1, 3, 7, 10, 256])
@pytest.mark.parametrize("decode", [True, None, "rgb"])
def test_same_batches_as_batching_the_samples(tmp_path, accelerate, batch_size, decode):
    ds = IndexedDataset(_write(tmp_path, _captions(40)), decode=decode)
    assert list(ds.columns(batch_size)) == _reference(ds, batch_size)
    assert list(ds.columns(batch_size, partial=False)) == _reference(ds, batch_size, partial=False)


def test_ragged_shards_and_field_changes_end_batches(tmp_path, accelerate, write_shards):
    # shards of the shared fixture have fields of many sizes; add shards whose samples differ in fields
    paths = write_shards(23, 5)
    for p in paths:
        index_shard(p)
    extra = [{"__key__": f"x{i}", "txt": "t", **({"cls": i} if i % 3 else {"json": [i]})} for i in range(9)]
    paths += _write(tmp_path, extra, per_shard=4, name="x") + _write(tmp_path, _captions(11), name="y")
    for decode in (True, None):
        ds = IndexedDataset(paths, decode=decode)
        for batch_size in (1, 4, 6, 50):
            assert list(ds.columns(batch_size)) == _reference(ds, batch_size)


@pytest.mark.parametrize("rows", [slice(3, 17), slice(6, 7), slice(None, None, 2), slice(None, None, -3), slice(5, 5)])
def test_views_of_a_dataset(tmp_path, accelerate, rows):
    ds = IndexedDataset(_write(tmp_path, _captions(30)), decode=True)[rows]
    assert list(ds.columns(4)) == _reference(ds, 4)


def test_zero_copy_undecoded_fields_are_views(tmp_path, accelerate):
    ds = IndexedDataset(_write(tmp_path, _captions(10)), zero_copy=True, decode=Decoder(only=["cls"]))
    batches = list(ds.columns(4))
    assert batches == _reference(ds, 4)
    assert isinstance(batches[0]["txt"][0], memoryview) and batches[0]["cls"][:2] == [-3, -2]


@pytest.mark.parametrize("bad", [{"txt": b"ok \xff\xfe"}, {"cls": b"1_0x"}, {"cls": b"seven"}])
def test_invalid_rows_raise_the_decoders_error(tmp_path, accelerate, bad):
    samples = _captions(12)
    samples[9] = {**samples[9], **bad}
    ds = IndexedDataset(_write(tmp_path, samples), decode=True)
    with pytest.raises(DecodeError) as expected:
        list(ds)
    with pytest.raises(DecodeError) as got:
        list(ds.columns(5))
    assert str(got.value) == str(expected.value) and "k00009" in str(got.value)
    assert type(got.value.__cause__) is type(expected.value.__cause__)


def test_non_simple_integers_decode_like_the_table(tmp_path, accelerate):
    values = [b" 12", b"+7", b"-0", b"007", b"1_000", b"123456789012345678901234", b"\t-3\n"]
    samples = [{"__key__": f"k{i}", "cls": v} for i, v in enumerate(values)]
    ds = IndexedDataset(_write(tmp_path, samples), decode=True)
    assert list(ds.columns(3)) == _reference(ds, 3)
    assert [x for b in ds.columns(100) for x in b["cls"]] == [int(v) for v in values]


def test_only_a_decoder(tmp_path):
    ds = IndexedDataset(_write(tmp_path, _captions(3)), decode=True)
    with pytest.raises(ConfigError, match="one Decoder"):
        next(ds.map(lambda s: s).columns(2))
    with pytest.raises(ConfigError, match="batch_size"):
        next(ds.columns(0))


def test_unindexed_layout_is_the_same_through_shardwriter(tmp_path, accelerate):
    with ShardWriter(str(tmp_path / "w-%03d.tar"), maxcount=8) as sink:
        for s in _captions(20):
            sink.write(s)
    for p in sink.shards:
        index_shard(p)
    ds = IndexedDataset(sink.shards, decode=True)
    assert list(ds.columns(6)) == _reference(ds, 6)


# -- the native step against the codec table -------------------------------------------------------------------


def _column(values: list[bytes], mode: int):
    buf = b"".join(values)
    sizes = np.array([len(v) for v in values], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return _scan.slice_column(buf, offsets, sizes, 0, len(values), mode)


def _decodes(fn, value):
    try:
        return True, fn(value)
    except Exception:
        return False, None


def _random_bytes(rng: random.Random) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
    if kind == 1:
        return "".join(rng.choice("aé€😀 \x00") for _ in range(rng.randrange(6))).encode()
    if kind == 2:
        return str(rng.randrange(-10**20, 10**20)).encode()[: rng.randrange(1, 24)]
    if kind == 3:
        odd = [b"+", b"-", b"", b" 1", b"1 ", b"--1", b"+-1", b"0x1", b"1e3", b"\xd9\xa1", b"999999999999999999"]
        return rng.choice(odd)
    return "".join(rng.choice("0123456789+-_ ") for _ in range(rng.randrange(1, 6))).encode()


@native
@pytest.mark.parametrize("codec_name", sorted(name for name in CONVERSIONS if name))
def test_native_modes_equal_the_codec_table(codec_name):
    (codec,) = {c for c in CODECS.values() if c.name == codec_name}
    mode, rng = CONVERSIONS[codec_name], random.Random(codec_name)
    natively = 0
    for _ in range(3000):
        value = _random_bytes(rng)
        got = _column([value], mode)
        ok, expected = _decodes(codec.decode, value)
        if got is not None:  # the native step decoded it: the table must give the same value, of the same type
            natively += 1
            assert ok and got == [expected] and type(got[0]) is type(expected), value
        elif codec_name == "text":  # text gives up exactly where the codec raises
            assert not ok, value
    assert natively > 500
    # a column gives up as a whole when one row needs the codec
    assert _column([b"1", b"2", b" 3"], CONVERSIONS["int"]) is None
    assert _column([b"a", b"\xff"], CONVERSIONS["text"]) is None


@native
def test_bytes_and_keys_modes_and_bounds():
    assert _column([b"ab", b"", b"\xff"], 0) == [b"ab", b"", b"\xff"]
    assert _column([b"k\xff"], 2) == [b"k\xff".decode("utf-8", "surrogateescape")]
    off, size = np.array([2], np.int64), np.array([5], np.int64)
    with pytest.raises(ValueError, match="outside"):
        _scan.slice_column(b"abcd", off, size, 0, 1, 0)
    with pytest.raises(ValueError):
        _scan.slice_column(b"abcd", np.array([0], np.int32), np.array([1], np.int32), 0, 1, 0)
    with pytest.raises(ValueError):
        _scan.slice_column(b"abcd", off, size, 0, 2, 0)
