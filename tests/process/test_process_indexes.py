"""The indexes a task writes from its writer's record equal those built by scanning the shard."""

from __future__ import annotations

import json
import os

import pytest

from shardstream.errors import SampleFormatError
from shardstream.indexed import ShardIndex, index_dataset, index_shard, write_dali_index
from shardstream.process import TarOutput, Task, map_dataset, run_task
from shardstream.process.indexes import write_shard_indexes
from shardstream.process.sources import ShardSource
from shardstream.writer import ShardWriter, TarWriter

REGULAR = [{"__key__": f"dir/s{i:04d}", "txt": f"text {i}", "CLS": str(i), "seg.PNG": bytes(i)} for i in range(40)]
MIXED = [{"__key__": f"k{i}é{{}}", **({"a{1}": b"x"} if i % 3 else {"json": b"[]", "cls": b"1"})} for i in range(30)]
IRREGULAR = {
    "a dot in a key": [{"__key__": "a.b", "txt": "1"}, {"__key__": "c", "txt": "2"}],
    "a key written twice": [{"__key__": "a", "txt": "1"}, {"__key__": "b", "txt": "2"}, {"__key__": "a", "cls": "3"}],
    "two fields one extension": [{"__key__": "a", "txt": "1", "TXT": "2"}],
}


def _written(tmp_path, samples, **kw):
    with ShardWriter(str(tmp_path / "w-%03d.tar"), record_index=True, **kw) as sink:
        for sample in samples:
            sink.write(sample)
    return sink


def _scanned(tmp_path, path):
    index = index_shard(path, tmp_path / "scan.ssidx")
    dali = write_dali_index(path, tmp_path / "scan.idx")
    return index, open(dali).read()


@pytest.mark.parametrize("samples", [REGULAR, MIXED, *IRREGULAR.values()],
                         ids=["regular", "mixed fields, braces, non-ASCII keys", *IRREGULAR])
def test_recorded_indexes_equal_scanned_ones(tmp_path, samples):
    sink = _written(tmp_path, samples, maxcount=25)
    for path in sink.shards:
        try:
            expected_index, expected_dali = _scanned(tmp_path, path)
        except SampleFormatError as e:  # the scan refuses the shard: so does the record, with the same error
            with pytest.raises(type(e)):
                write_shard_indexes(path, sink.index_records[path])
            continue
        sidecar, dali = write_shard_indexes(path, sink.index_records[path])
        got = ShardIndex.load(path, sidecar)
        assert got == expected_index
        assert [got.members(i) for i in range(len(got))] == [expected_index.members(i) for i in range(len(got))]
        assert open(dali).read() == expected_dali


def test_whitespace_dali_cannot_hold_is_refused_as_by_the_scan(tmp_path):
    sink = _written(tmp_path, [{"__key__": "a b", "txt": "1"}])
    with pytest.raises(SampleFormatError, match="whitespace"):
        write_shard_indexes(sink.shards[0], sink.index_records[sink.shards[0]])


@pytest.mark.parametrize("samples", [REGULAR, IRREGULAR["a dot in a key"]], ids=["regular", "a dot in a key"])
def test_dataset_index_from_task_results_equals_the_one_read_from_sidecars(tmp_path, monkeypatch, samples):
    """The job writes dataset.json from the entries its tasks hand back; reading the sidecars gives the same file."""

    inputs = []
    for n in range(3):
        inputs.append(str(tmp_path / f"in-{n}.tar"))
        with TarWriter(inputs[-1]) as sink:
            for sample in samples[n::3] or samples:
                sink.write(sample)
    out = str(tmp_path / "out")
    with monkeypatch.context() as patch:  # a fresh run reads no sidecar back
        patch.setattr("shardstream.process.outputs.index_dataset", lambda *a, **k: pytest.fail("sidecars read"))
        result = map_dataset(inputs, out, engine="local", workers=2, maxcount=7)
    with open(result.index, "rb") as f:
        from_tasks = f.read()
    assert json.loads(from_tasks)["samples"] == result.samples and len(result.shards) >= 3
    index_dataset(result.urls, os.path.join(out, "read.json"))  # beside it: the same relative paths
    with open(os.path.join(out, "read.json"), "rb") as f:
        assert f.read() == from_tasks
    reused = map_dataset(inputs, out, engine="local", workers=2, maxcount=7)  # resumed: read from the sidecars
    assert reused.reused == 3 and open(reused.index, "rb").read() == from_tasks


def test_task_results_carry_the_entries_only_where_sidecars_are_written(tmp_path):

    with TarWriter(str(tmp_path / "in.tar")) as sink:
        for sample in REGULAR[:10]:
            sink.write(sample)
    indexed = run_task(Task(0, ShardSource(str(tmp_path / "in.tar")), TarOutput(str(tmp_path / "a"), maxcount=4)))
    assert [(e.url, e.samples, e.size) for e in indexed.entries] == [tuple(s) for s in indexed.shards]
    assert [e.index for e in indexed.entries] == [s.path + ".ssidx" for s in indexed.shards]
    plain = run_task(Task(0, ShardSource(str(tmp_path / "in.tar")), TarOutput(str(tmp_path / "b"), index=False)))
    assert plain.entries == () and len(plain.shards) == 1
