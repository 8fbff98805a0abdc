"""From shard URLs to samples, with errors routed to the handler and never a silently short shard."""

from __future__ import annotations

import gzip
import os
import time
import warnings
from pathlib import Path

import pytest

from shardstream.errors import DuplicateFieldError, OpenError, TarFormatError
from shardstream.pipeline import (
    DataPipeline,
    SimpleShardList,
    group_by_keys,
    ignore_and_continue,
    tar_file_expander,
    tarfile_to_samples,
    url_opener,
    warn_and_continue,
    warn_and_stop,
)
from shardstream.pipeline.error_handlers import PipelineWarning

from pipeline_data import write_tar


def keys(samples):
    return [s["__key__"] for s in samples]


def test_reads_every_sample_of_every_shard_in_order(make_shards):
    shards = make_shards(2, 3)
    out = list(tarfile_to_samples()([{"url": u} for u in shards]))
    assert keys(out) == ["s0-000", "s0-001", "s0-002", "s1-000", "s1-001", "s1-002"]
    assert out[0]["__url__"] == shards[0] and out[0]["txt"] == b"text 0 0" and out[0]["cls"] == b"0"
    assert keys(tarfile_to_samples()(shards)) == keys(out)  # plain URL strings work too


def test_select_rename_and_key_rule(tmp_path):
    url = write_tar(tmp_path / "a.tar", [("x/a.b.txt", b"1"), ("x/a.b.cls", b"2"), ("x/c.d.txt", b"3")])
    out = list(tarfile_to_samples(select_files=lambda n: n.endswith(".txt"))([url]))
    assert [sorted(s) for s in out] == [["__key__", "__url__", "b.txt"], ["__key__", "__url__", "d.txt"]]
    out = list(tarfile_to_samples(keys="last-dot")([url]))
    assert keys(out) == ["x/a.b", "x/c.d"] and out[0]["cls"] == b"2"
    out = list(tarfile_to_samples(rename_files=lambda n: n.replace(".b.", "_b."))([url]))
    assert keys(out) == ["x/a_b", "x/c"]
    out = list(tarfile_to_samples(keys=lambda name: tuple(name.rsplit(".", 1)))([url]))
    assert keys(out) == ["x/a.b", "x/c.d"]


def test_compressed_shards(make_shards, tmp_path):
    (plain,) = make_shards(1, 2)
    gz = tmp_path / "x.tar.gz"
    gz.write_bytes(gzip.compress(Path(plain).read_bytes()))
    assert keys(tarfile_to_samples()([str(gz)])) == ["s0-000", "s0-001"]


def test_corrupt_shard_is_skipped_with_a_warning_naming_it(make_shards, tmp_path):
    good = make_shards(2, 2)
    bad = tmp_path / "bad.tar"
    bad.write_bytes(Path(good[0]).read_bytes()[:700])  # cut inside the first member's padding
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = list(tarfile_to_samples(handler=warn_and_continue)([str(bad), good[1]]))
    assert keys(out) == ["s0-000", "s1-000", "s1-001"]  # the first, partial: its whole member, marked (issue 12)
    assert out[0]["__partial__"] is True and out[0]["txt"] == b"text 0 0" and "cls" not in out[0]
    assert any(w.category is PipelineWarning and str(bad) in str(w.message) for w in caught)
    with pytest.raises(TarFormatError) as info:
        list(tarfile_to_samples()([str(bad)]))
    assert info.value.url == str(bad)


def test_missing_shard(make_shards, tmp_path):
    good = make_shards(1, 2)[0]
    missing = str(tmp_path / "missing.tar")
    with pytest.raises(OpenError, match="missing.tar"):
        list(tarfile_to_samples()([missing, good]))
    assert keys(tarfile_to_samples(handler=ignore_and_continue)([missing, good])) == ["s0-000", "s0-001"]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert list(tarfile_to_samples(handler=warn_and_stop)([missing, good])) == []


def test_bad_sample_goes_to_the_handler_and_stop_ends_the_stream(tmp_path):
    url = write_tar(tmp_path / "dup.tar", [("a.txt", b"1"), ("b.txt", b"2"), ("b.txt", b"3"), ("c.txt", b"4")])
    with pytest.raises(DuplicateFieldError) as info:
        list(tarfile_to_samples()([url]))
    assert info.value.key == "b" and url in str(info.value)
    assert keys(tarfile_to_samples(handler=ignore_and_continue)([url])) == ["a", "c"]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert keys(tarfile_to_samples(handler=warn_and_stop)([url, url])) == ["a"]


def test_a_failing_pipe_is_an_error_not_a_short_shard(make_shards):
    (shard,) = make_shards(1, 3)
    ok = list(tarfile_to_samples()([f"pipe:cat {shard}"]))
    assert len(ok) == 3
    with pytest.raises(OpenError) as info:
        list(tarfile_to_samples()([f"pipe:cat {shard}; echo 'network down' >&2; exit 7"]))
    assert "status 7" in str(info.value) and "network down" in str(info.value)
    size = os.path.getsize(shard)
    with pytest.raises(OpenError, match="status 3"):  # cut short, then failed: the exit status wins
        list(tarfile_to_samples()([f"pipe:head -c {size // 2} {shard}; exit 3"]))


def test_stopping_early_kills_the_pipe(make_shards, tmp_path):
    (shard,) = make_shards(1, 3)
    pidfile = tmp_path / "pid"
    samples = tarfile_to_samples()([f"pipe:echo $$ > {pidfile}; cat {shard}; sleep 60"])
    start = time.time()
    assert next(samples)["__key__"] == "s0-000"
    samples.close()
    assert time.time() - start < 10
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


def test_webdataset_three_steps_give_the_same_samples(make_shards):
    shards = make_shards(2, 3)
    steps = list(group_by_keys(tar_file_expander(url_opener(SimpleShardList(shards)))))
    direct = list(DataPipeline(SimpleShardList(shards), tarfile_to_samples()))
    assert [sorted(s.items()) for s in steps] == [sorted(s.items()) for s in direct]
