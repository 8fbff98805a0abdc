"""The batch read of IndexedDataset (``__getitems__`` and ``collated`` in one C call, :mod:`shardstream.indexed.opened`)
gives exactly what reading sample by sample gives, and steps aside (to the per-sample path) wherever it does not
apply: no extension, views, zero-copy, decoders, indices out of range, a bounded number of open shards, a forked
process."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

from shardstream import _native
from shardstream.indexed import IndexedDataset, index_shard, opened
from shardstream.indexed.opened import ShardTable, sample_gatherer
from shardstream.pipeline import default_collation_fn
from shardstream.tar import reader


def _dataset(write_shards, **kw):
    paths = write_shards(61, 7)
    for path in paths:
        index_shard(path)
    return IndexedDataset(paths, **kw)


def _one_by_one(ds, indices):
    return [ds[int(i)] for i in indices]


@pytest.fixture
def ds(write_shards):
    return _dataset(write_shards)


def _types(samples):
    return [[(k, type(v)) for k, v in s.items()] for s in samples]


def test_a_random_batch_is_read_as_sample_by_sample(ds):
    rng = np.random.default_rng(1)
    for size in (1, 5, 100):
        indices = rng.integers(0, len(ds), size)
        got = ds.__getitems__(indices)
        want = _one_by_one(ds, indices)
        assert got == want and _types(got) == _types(want)
        assert ds.__getitems__(indices.tolist()) == want
    assert ds.__getitems__(np.zeros(0, dtype=np.int64)) == []


def test_the_c_call_is_used_when_the_extension_is_there(ds, monkeypatch):
    gather = sample_gatherer()
    if gather is None:
        pytest.skip("no C extension")
    calls = []
    monkeypatch.setattr(_native.extension, "gather_samples", lambda *a: calls.append(a) or gather(*a))
    assert ds.__getitems__(np.arange(10)) == _one_by_one(ds, range(10))
    assert calls


def test_other_arrays_and_lists(ds):
    indices = np.arange(60, 0, -3)
    want = _one_by_one(ds, indices)
    assert ds.__getitems__(indices) == want  # not contiguous in memory
    assert ds.__getitems__(indices.astype(np.uint32)) == want
    assert ds.__getitems__(indices.astype(np.int16)) == want
    assert ds.__getitems__([-1, 0, -61]) == [ds[-1], ds[0], ds[0]]
    assert ds.__getitems__(np.array([-1, 3])) == [ds[60], ds[3]]


def test_out_of_range_and_wrong_types_raise_as_before(ds):
    with pytest.raises(IndexError, match="sample index 61 is out of range"):
        ds.__getitems__(np.array([3, 61]))
    with pytest.raises(IndexError, match="out of range"):
        ds.__getitems__([0, -62])
    with pytest.raises(TypeError, match="must be integers"):
        ds.__getitems__(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="must be integers"):
        ds.__getitems__(["a"])


def test_views_zero_copy_and_decoders(write_shards):
    base = _dataset(write_shards)
    for view in (base[:50], base[5:40], base[50:3:-2], base[::3]):
        indices = np.arange(len(view))[::-1]
        assert view.__getitems__(indices) == _one_by_one(view, indices)
        with pytest.raises(IndexError):
            view.__getitems__(np.array([len(view)]))
    zero = IndexedDataset(base._shards[0].url, zero_copy=True)
    got = zero.__getitems__(np.array([2, 0]))
    assert all(isinstance(v, memoryview) for s in got for k, v in s.items() if not k.startswith("__"))
    decoded = base.decode()
    assert decoded.__getitems__(np.array([4, 9])) == [decoded[4], decoded[9]]
    assert decoded.collated(np.array([4, 9])) is None


def test_without_the_extension(ds, monkeypatch):
    monkeypatch.setattr(reader, "USE_ACCELERATOR", False)
    assert sample_gatherer() is None
    assert ds.__getitems__(np.arange(20)) == _one_by_one(ds, range(20))
    assert ds.collated(np.arange(3)) is None


def test_few_open_shards(ds):
    ds._here().open.limit = 2  # a batch over more shards than that is read sample by sample
    rng = np.random.default_rng(2)
    for _ in range(5):
        indices = rng.integers(0, len(ds), 30)
        assert ds.__getitems__(indices) == _one_by_one(ds, indices)
        assert len(ds._here().open) <= 2
        assert set(ds._here().tables) <= set(ds._here().open.keys())
    ds.close()
    assert ds._here().tables == {}
    assert ds.__getitems__(np.arange(3)) == _one_by_one(ds, range(3))


def test_collated_is_the_default_collation(ds):
    if sample_gatherer() is None:
        pytest.skip("no C extension")
    indices = np.array([60, 3, 17, 17, 42])
    got = ds.collated(indices)
    want = default_collation_fn(ds.__getitems__(indices))
    assert got == want and list(got) == list(want)
    assert [type(v) for v in got.values()] == [list] * len(want)


def test_collated_steps_aside_when_the_fields_differ(tmp_path):
    path = str(tmp_path / "mixed.tar")
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:  # members in the order given
        for name, data in [("a.txt", b"x"), ("a.cls", b"1"), ("b.cls", b"2"), ("b.txt", b"y"), ("c.txt", b"z")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    index_shard(path)
    ds = IndexedDataset(path)
    assert list(ds[0]) == ["__key__", "__url__", "txt", "cls"] and list(ds[1])[2:] == ["cls", "txt"]
    assert ds.collated(np.array([0, 1])) is None  # other order
    assert ds.collated(np.array([0, 2])) is None  # fewer fields
    if sample_gatherer() is not None:
        assert ds.collated(np.array([1, 1]))["txt"] == [b"y", b"y"]
    assert ds.__getitems__(np.array([2, 1, 0])) == [ds[2], ds[1], ds[0]]
    assert [list(s) for s in ds.__getitems__(np.array([1, 0]))] == [list(ds[1]), list(ds[0])]


def test_a_forked_process_opens_its_own_shards(ds, forked):
    parent = ds.__getitems__(np.arange(0, 61, 4))
    assert forked(ds.__getitems__, np.arange(0, 61, 4)) == parent


def test_the_c_call_reads_named_shard_tables(ds):
    """Each shard's table for ``gather_samples`` is a :class:`ShardTable` (named fields, in the C order), made by
    ``OpenShard.table`` only."""
    if sample_gatherer() is None:
        pytest.skip("no C extension")
    indices = np.arange(0, len(ds), 5)
    assert ds.__getitems__(indices) == _one_by_one(ds, indices)
    tables = ds._here().tables
    assert tables and all(type(table) is ShardTable for table in tables.values())
    for number, table in tables.items():
        shard = ds._here().open.get(number)
        assert table.url == shard.url and table.first == shard.first and table.extensions == shard.index.extensions
        assert table == tuple(getattr(table, name) for name in ShardTable._fields)


def test_a_batch_over_more_shards_than_samples(write_shards):
    """The C call sets up one table per shard of the batch, at most one per sample: batches of one sample over
    many shards, and of many samples over every shard."""
    ds = _dataset(write_shards)  # 61 samples in 9 shards
    for indices in (np.array([60]), np.array([0, 60]), np.arange(60, -1, -7), np.arange(61)[::-1]):
        assert ds.__getitems__(indices) == _one_by_one(ds, indices)
        if sample_gatherer() is not None:
            assert ds.collated(indices) == default_collation_fn(_one_by_one(ds, indices))


def test_the_collated_reader_gives_what_collated_gives(ds):
    read = ds.collated_reader()
    rng = np.random.default_rng(3)
    for size in (1, 9, 100):
        indices = rng.integers(0, len(ds), size)
        for form in (indices, indices.astype(np.int32), indices[::2], indices.tolist()):
            assert read(form) == ds.collated(form)
    assert read(np.array([3, 61])) is None and read(np.array([-1, 0])) == ds.collated(np.array([-1, 0]))
    for other in (ds[5:40], ds.decode(), IndexedDataset(ds._shards[0].url, zero_copy=True)):
        assert other.collated_reader()(np.array([1, 0])) == other.collated(np.array([1, 0]))


def test_the_collated_reader_without_the_extension(ds, monkeypatch):
    monkeypatch.setattr(reader, "USE_ACCELERATOR", False)
    assert ds.collated_reader()(np.arange(3)) is None is ds.collated(np.arange(3))


def test_the_collated_reader_looks_up_nothing_once_the_shards_are_open(ds, monkeypatch):
    if sample_gatherer() is None:
        pytest.skip("no C extension")
    calls = []
    read = opened.row_gatherer(ds._rows, ds._ends_array, ds._here(), True,
                               lambda indices: calls.append(indices) or ds.collated(indices))
    everything = np.arange(len(ds))
    assert read(everything) == ds.collated(everything) and len(calls) == 1  # the first batch opens the shards
    for indices in (everything[::-1].copy(), np.array([7, 3, 60])):
        assert read(indices) == ds.collated(indices)
    assert len(calls) == 1
    ds.close()  # the shards leave: the next batch opens them again
    assert read(everything) == ds.collated(everything) and len(calls) == 2
    monkeypatch.setattr(opened.os, "getpid", lambda: -1)  # another process: never this one's tables
    assert read(everything) == ds.collated(everything) and len(calls) == 3


def test_a_forked_process_reads_with_its_own_collated_reader(ds, forked):
    read = ds.collated_reader()
    parent = read(np.arange(0, 61, 4))
    assert forked(read, np.arange(0, 61, 4)) == parent
    assert forked(lambda i: ds.collated_reader()(i), np.arange(0, 61, 4)) == parent


def test_the_shards_share_their_field_names(ds):
    """Each field name is one string object in every shard's index (loaded from JSON: interned), so the C call
    compares the fields of samples of different shards by identity."""
    first, last = ds._index(0).extensions, ds._index(len(ds._shards) - 1).extensions
    assert first == last and all(a is b for a, b in zip(first, last, strict=True))
