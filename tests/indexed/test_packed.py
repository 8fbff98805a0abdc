"""Packed shards (``IndexedDataset.packed``, :func:`shardstream.indexed.opened.pack_table`): a batch reader of small
samples reads copies of their fields instead of the tar files' memory maps. The samples are the same; the copies
stay within their budget and leave with their shards; the shard files' pages leave the reader's resident memory;
shards of big members are left mapped."""

from __future__ import annotations

import mmap
import sys
import tracemalloc

import numpy as np
import pytest

from shardstream.indexed import IndexedDataset, indexed_shard_writer
from shardstream.indexed.opened import sample_gatherer
from shardstream.training import TrainingDataset

pytestmark = pytest.mark.skipif(sample_gatherer() is None, reason="the batch reader is the C extension's")


def _write(folder, samples: int, per_shard: int, size: int = 40) -> list[str]:
    with indexed_shard_writer(str(folder / "p-%03d.tar"), maxcount=per_shard) as sink:
        for i in range(samples):
            sink.write({"__key__": f"s{i:05d}", "txt": f"{i:05d}".ljust(size, "x"), "cls": i % 10})
    return sink.shards


def _buffers(ds) -> list:
    return [t.buffer for _, t in sorted(ds._here().tables.items())]


def test_packed_batches_are_the_samples_of_the_maps(tmp_path):
    paths = _write(tmp_path, 300, 70)
    plain, packed = IndexedDataset(paths), IndexedDataset(paths).packed()
    rng = np.random.default_rng(0)
    for size in (1, 7, 100):
        rows = rng.integers(0, len(plain), size)
        assert packed.__getitems__(rows) == plain.__getitems__(rows) == [plain[int(r)] for r in rows]
        assert packed.collated(rows) == plain.collated(rows)
    assert all(isinstance(b, bytes) for b in _buffers(packed))
    assert all(isinstance(b, mmap.mmap) for b in _buffers(plain))
    assert packed._here().packed == sum(len(b) for b in _buffers(packed))


def test_packing_keeps_to_its_budget(tmp_path):
    paths = _write(tmp_path, 200, 50)
    one = IndexedDataset(paths).packed()  # to learn what one shard's copy costs
    one.__getitems__(np.array([0]))
    size = one._here().packed
    ds = IndexedDataset(paths).packed(budget=2 * size + 1)
    assert ds.__getitems__(np.arange(200)) == [ds[i] for i in range(200)]
    kinds = [isinstance(b, bytes) for b in _buffers(ds)]
    assert kinds.count(True) == 2 and ds._here().packed == 2 * size
    nothing = IndexedDataset(paths).packed(budget=0)
    nothing.__getitems__(np.arange(200))
    assert all(isinstance(b, mmap.mmap) for b in _buffers(nothing))


def test_shards_of_big_members_stay_mapped(tmp_path):
    paths = _write(tmp_path, 20, 10, size=8000)  # 8000 of 9216 bytes are data: a copy would save little
    ds = IndexedDataset(paths).packed()
    assert ds.__getitems__(np.arange(20)) == [ds[i] for i in range(20)]
    assert all(isinstance(b, mmap.mmap) for b in _buffers(ds)) and ds._here().packed == 0


def test_a_shard_closed_by_the_open_limit_gives_its_copy_back(tmp_path):
    paths = _write(tmp_path, 200, 50)
    ds = IndexedDataset(paths).packed()
    handles = ds._here()
    handles.open.limit = 2  # one shard per C call, two open at most
    for first in (0, 50, 100, 150, 0):
        assert ds.__getitems__(np.arange(first, first + 50)) == [ds[i] for i in range(first, first + 50)]
        assert len(handles.tables) <= 2
        assert handles.packed == sum(len(b) for b in _buffers(ds) if isinstance(b, bytes))


def _resident(paths: list[str]) -> int:
    """Bytes of this process's resident memory that are pages of the files ``paths`` (its maps of them)."""
    names, total, current = set(paths), 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                current = len(head) > 5 and head[5] in names
            elif current and head[0] == "Rss:":
                total += int(head[1]) * 1024
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_a_global_shuffle_does_not_hold_the_shards_in_resident_memory(tmp_path):
    paths = _write(tmp_path, 4000, 1000)  # ~2 KiB of tar per 50 bytes of fields
    size = sum(len(open(p, "rb").read()) for p in paths)
    ds = TrainingDataset(paths, batch_size=100, seed=3)
    keys = [k for batch in ds for k in batch["__key__"]]
    assert sorted(keys) == [f"s{i:05d}" for i in range(4000)] and keys != sorted(keys)
    assert _resident(paths) < size // 10  # the whole files, mapped and touched, without the copies


def test_an_epoch_holds_no_object_per_sample(tmp_path):
    paths = _write(tmp_path, 20_000, 5000, size=8)
    ds = TrainingDataset(paths, batch_size=100, seed=1)
    assert sum(len(b["cls"]) for b in ds) == 20_000  # the first epoch packs the shards
    tracemalloc.start()
    try:
        assert sum(len(b["cls"]) for b in ds) == 20_000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # a block of the order and a batch: no list, array or object per sample of the epoch
