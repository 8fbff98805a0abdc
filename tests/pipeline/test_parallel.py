"""parallel_map (ordered, bounded, handler semantics of map) and tarfile_to_columns (= batched samples)."""

from __future__ import annotations

import threading
import time

import pytest

import shardstream as wds
from shardstream.codecs import Decoder
from shardstream.errors import ConfigError, DuplicateFieldError
from shardstream.pipeline import parallel_map, tarfile_to_columns
from shardstream.testing import write_shards


def test_parallel_map_keeps_order_and_uses_threads():
    names = set()

    def slow(x):
        names.add(threading.current_thread().name)
        time.sleep(0.002 * (x % 3))
        return x * 10

    assert list(parallel_map(slow, workers=3)(range(30))) == [x * 10 for x in range(30)]
    assert len(names) > 1 and all(n.startswith("shardstream-map") for n in names)


def test_parallel_map_bounds_what_it_takes_from_upstream():
    taken = []

    def source():
        for i in range(100):
            taken.append(i)
            yield i

    out = parallel_map(lambda x: x, workers=2, inflight=3)(source())
    assert next(out) == 0
    assert len(taken) <= 4  # the one yielded and at most 3 in flight
    out.close()


def test_parallel_map_errors_follow_the_handler():
    def f(sample):
        if sample["__key__"] == "b":
            raise ValueError("boom")
        return sample["__key__"]

    samples = [{"__key__": k, "__url__": "u.tar"} for k in "abc"]
    with pytest.raises(ValueError, match="boom") as info:
        list(parallel_map(f)(samples))
    assert getattr(info.value, "key", None) == "b" or "b" in str(info.value.__notes__)
    with pytest.warns(Warning, match="boom"):
        assert list(parallel_map(f, handler=wds.warn_and_continue)(samples)) == ["a", "c"]
    assert list(parallel_map(f, handler=lambda e: False)(samples)) == ["a"]


def test_parallel_map_arguments():
    with pytest.raises(ConfigError):
        list(parallel_map(abs, workers=0)([1]))
    with pytest.raises(ConfigError):
        list(parallel_map(abs, inflight=0)([1]))


def small_shards(tmp_path, n_shards=3, per_shard=7):
    """Shards ``s0.tar``...: keys ``{shard}-{index}``, ``txt`` ``"text {shard} {index}"``, ``cls`` the index."""
    fields = {"txt": lambda shard, index, n: f"text {shard} {index}", "cls": lambda shard, index, n: index}
    return write_shards(tmp_path, [per_shard] * n_shards, fields, name="s{shard}.tar", key="{shard}-{index}")


@pytest.mark.parametrize("batch_size", [1, 4, 5, 100])
def test_columns_equal_batched_samples(tmp_path, batch_size):
    urls = small_shards(tmp_path)
    columns = list(wds.DataPipeline(wds.SimpleShardList(urls), tarfile_to_columns(batch_size),
                                    wds.map(Decoder().decode_columns)))
    samples = list(wds.DataPipeline(wds.SimpleShardList(urls), wds.tarfile_to_samples(), wds.decode()))
    rows = [dict(zip(batch, values)) for batch in columns for values in zip(*batch.values())]
    assert rows == samples
    assert [len(b["__key__"]) for b in columns][:-1] == [batch_size] * (len(columns) - 1)
    dropped = list(wds.DataPipeline(wds.SimpleShardList(urls), tarfile_to_columns(batch_size, partial=False)))
    assert all(len(b["cls"]) == batch_size for b in dropped) and len(dropped) == 21 // batch_size


def test_columns_handler_and_errors(tmp_path):
    urls = small_shards(tmp_path, 2, 3)
    bad = str(tmp_path / "bad.tar")
    with open(urls[1], "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(data[: 5 * 1024 + 100])  # cut inside the sixth member's header
    missing = str(tmp_path / "missing.tar")
    shards = [missing, urls[0], bad, urls[1]]
    skip = wds.ignore_and_continue
    columns = list(wds.DataPipeline(wds.SimpleShardList(shards), tarfile_to_columns(100, handler=skip)))
    samples = list(wds.DataPipeline(wds.SimpleShardList(shards), wds.tarfile_to_samples(handler=skip)))
    partial = [s for s in samples if s.get("__partial__")]  # bad.tar's cut sample: samples only (issue 12)
    assert [s["__key__"] for s in partial] == ["1-2"] and "txt" not in partial[0]
    samples = [s for s in samples if not s.get("__partial__")]
    assert [dict(zip(b, values)) for b in columns for values in zip(*b.values())] == samples
    assert [s["__key__"] for s in samples] == ["0-0", "0-1", "0-2", "1-0", "1-1", "1-0", "1-1", "1-2"]
    with pytest.raises(OSError, match="missing.tar"):
        list(wds.DataPipeline(wds.SimpleShardList([missing]), tarfile_to_columns(10)))


def test_columns_raise_sample_errors(tmp_path):
    url = str(tmp_path / "dup.tar")
    from shardstream.tar import TarStreamWriter

    with open(url, "wb") as f, TarStreamWriter(f) as tw:
        tw.add("a.txt", b"1")
        tw.add("a.txt", b"2")
    with pytest.raises(DuplicateFieldError):
        list(wds.DataPipeline(wds.SimpleShardList(url), tarfile_to_columns(4)))


def test_parallel_stages_are_not_resumable_and_say_so(tmp_path):
    (url,) = write_shards(tmp_path, [4], {"cls": lambda shard, index, n: index}, name="p.tar", key="{index}")
    pipelines = {
        "parallel_map": wds.WebDataset(url, shardshuffle=False).compose(parallel_map(lambda s: s)),
        "tarfile_to_columns": wds.DataPipeline(wds.SimpleShardList(url), tarfile_to_columns(2)),
    }
    for name, pipeline in pipelines.items():
        it = iter(pipeline)
        next(it)
        with pytest.raises(ConfigError, match=name):
            pipeline.state_dict()
