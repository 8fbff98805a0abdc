"""map_dataset on the inline engine and the local process pool: results, determinism, resuming, retries,
failure reports, a pool worker killed mid-task, indexes."""

from __future__ import annotations

import json
import os
import socket

import pytest
from jobfns import Always, Once, explode, first_of_shard, keep_even, upper
from process_helpers import make_shards, tree_bytes

import shardstream as wds
from shardstream.errors import ConfigError, ProcessingError
from shardstream.indexed import IndexedDataset
from shardstream.process import ShellCommand, TarOutput, map_dataset


def read(urls):
    return [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in wds.WebDataset(urls, shardshuffle=False)]


def test_upper_inline_gives_every_sample_transformed_in_order(shards, tmp_path):
    result = map_dataset(shards, str(tmp_path / "out"), upper, engine="inline")
    assert (result.tasks, result.samples_in, result.samples, result.reused) == (4, 100, 100, 0)
    got = read(result.urls)
    assert [s["__key__"] for s in got] == [f"s{i:05d}" for i in range(100)]
    assert got[7]["txt"] == b"SAMPLE 7 XXXXXXX" and got[7]["len.cls"] == b"16" and "cls" not in got[7]
    assert result.urls == [str(tmp_path / "out" / f"part-{t:06d}-000.tar") for t in range(4)]


def test_local_pool_output_is_byte_identical_to_inline(shards, tmp_path):
    inline = map_dataset(shards, str(tmp_path / "a"), upper, engine="inline", maxcount=10)
    pool = map_dataset(shards, str(tmp_path / "b"), upper, engine="local", workers=2, maxcount=10)
    assert [os.path.basename(u) for u in inline.urls] == [os.path.basename(u) for u in pool.urls]
    assert len(pool.urls) == 12  # 25 samples per task, 10 per shard: parts 000, 001, 002
    assert tree_bytes(str(tmp_path / "a")) == tree_bytes(str(tmp_path / "b"))


def test_drop_explode_and_per_shard(shards, tmp_path):
    assert map_dataset(shards, str(tmp_path / "even"), keep_even, engine="inline").samples == 60  # cls 0, 2, 4 of 0..4
    exploded = map_dataset(shards[:1], str(tmp_path / "two"), explode, engine="inline")
    assert [s["__key__"] for s in read(exploded.urls)][:3] == ["s00000a", "s00000b", "s00001a"]
    firsts = map_dataset(shards, str(tmp_path / "first"), first_of_shard, per="shard", engine="inline")
    assert [s["__key__"] for s in read(firsts.urls)] == ["s00000", "s00025", "s00050", "s00075"]


def test_indexes_are_written_and_usable(shards, tmp_path):
    result = map_dataset(shards, str(tmp_path / "out"), upper, engine="local", workers=2, maxcount=10)
    assert result.index == str(tmp_path / "out" / "dataset.json")
    ds = IndexedDataset(result.index)
    assert len(ds) == 100 and ds[42]["txt"] == b"SAMPLE 42 " + b"X" * 42
    for url in result.urls:
        assert os.path.exists(url + ".ssidx")
        with open(url[: -len(".tar")] + ".idx") as f:
            assert f.readline().startswith("v1.2 ")


def test_rerun_skips_complete_tasks_and_redoes_changed_ones(shards, tmp_path):
    out = str(tmp_path / "out")
    first = map_dataset(shards, out, upper, engine="inline")
    before = tree_bytes(out)
    again = map_dataset(shards, out, upper, engine="inline")
    assert again.reused == 4 and again.urls == first.urls and tree_bytes(out) == before
    assert list(first.worker_cpu) == [f"{socket.gethostname()}:{os.getpid()}"]  # inline: this process did all
    assert first.worker_cpu[f"{socket.gethostname()}:{os.getpid()}"] > 0 and again.worker_cpu == {}  # none ran
    os.remove(first.urls[2])  # an output lost after the run: its task is redone, the others are reused
    third = map_dataset(shards, out, upper, engine="inline")
    assert third.reused == 3 and tree_bytes(out) == before
    other = map_dataset(shards, out, upper, engine="inline", version="2")  # the function changed
    assert other.reused == 0


def test_a_failing_task_is_retried(shards, tmp_path):
    fn = Once(str(tmp_path / "marker"), key="s00030", what="raise")
    result = map_dataset(shards, str(tmp_path / "out"), fn, engine="local", workers=2, retries=1)
    assert result.samples == 100 and os.path.exists(tmp_path / "marker")
    map_dataset(shards, str(tmp_path / "clean"), upper, engine="inline")
    assert tree_bytes(str(tmp_path / "out")) == tree_bytes(str(tmp_path / "clean"))


def test_failures_are_reported_per_task_after_the_others_complete(shards, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ProcessingError) as info:
        map_dataset(shards, out, Always("s00060"), engine="local", workers=2, retries=1)
    (failure,) = info.value.failures
    assert failure.index == 2 and failure.url == shards[2] and failure.attempts == 2
    assert "ValueError: cannot process s00060" in failure.error and "s00060" in str(info.value)
    assert len(info.value.result.shards) == 3  # the three other tasks completed
    assert not os.path.exists(os.path.join(out, "part-000002-000.tar"))  # nothing partial published
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]


def test_a_rerun_redoes_only_the_failed_task(shards, tmp_path):
    out, fn = str(tmp_path / "out"), Once(str(tmp_path / "marker"), key="s00060", what="raise")
    with pytest.raises(ProcessingError, match="1 of 4 tasks failed"):
        map_dataset(shards, out, fn, engine="local", workers=2, retries=0)
    result = map_dataset(shards, out, fn, engine="local", workers=2, retries=0)  # the failure was transient
    assert result.reused == 3 and result.samples == 100 and result.index


def test_on_error_skip_reports_the_samples(shards, tmp_path):
    result = map_dataset(shards, str(tmp_path / "out"), Always("s00060"), engine="inline", on_error="skip")
    assert result.samples == 99
    ((url, skip),) = result.skipped
    assert url == shards[2] and skip.key == "s00060" and "cannot process" in skip.reason


def test_a_killed_pool_worker_is_replaced_and_outputs_stay_exact(shards, tmp_path):
    fn = Once(str(tmp_path / "marker"), key="s00040", what="kill", slow=0.002)
    result = map_dataset(shards, str(tmp_path / "out"), fn, engine="local", workers=2, retries=2)
    assert result.samples == 100 and os.path.exists(tmp_path / "marker")
    map_dataset(shards, str(tmp_path / "clean"), upper, engine="inline")
    assert tree_bytes(str(tmp_path / "out")) == tree_bytes(str(tmp_path / "clean"))


def test_manifest_records_the_task(shards, tmp_path):
    result = map_dataset(shards[:1], str(tmp_path / "out"), upper, engine="inline")
    with open(TarOutput(str(tmp_path / "out")).manifest_url(0)) as f:
        doc = json.load(f)
    assert doc["input"] == shards[0] and doc["samples"] == 25 and doc["shards"][0][0] == result.urls[0]


def test_shell_command_needs_the_opt_in_and_runs_per_sample(shards, tmp_path):
    with pytest.raises(ConfigError, match="allow_shell=True"):
        ShellCommand("cat sample.txt")
    fn = ShellCommand("rev < sample.txt > sample.rev.txt && rm sample.txt sample.cls", allow_shell=True)
    result = map_dataset(shards[:1], str(tmp_path / "out"), fn, engine="local", workers=2)
    first = read(result.urls)[0]
    assert sorted(first) == ["__key__", "rev.txt"] and first["rev.txt"] == b" 0 elpmas"  # "sample 0 " reversed


def test_bad_arguments_are_config_errors(shards, tmp_path):
    with pytest.raises(ConfigError, match="engine"):
        map_dataset(shards, str(tmp_path / "o"), upper, engine="spark")
    with pytest.raises(ConfigError, match="Ray engine is not provided"):
        map_dataset(shards, str(tmp_path / "o"), upper, engine="ray")
    with pytest.raises(ConfigError, match="on_error"):
        map_dataset(shards, str(tmp_path / "o"), upper, on_error="ignore")
    with pytest.raises(ConfigError, match="no tasks"):
        map_dataset([], str(tmp_path / "o"), upper)


def test_make_shards_helper_is_deterministic(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert tree_bytes(os.path.dirname(make_shards(tmp_path / "a")[0])) == tree_bytes(
        os.path.dirname(make_shards(tmp_path / "b")[0]))
