"""The stream-file stages in pipelines: like tarfile_to_samples (shard lists, handlers, resume mid-file)."""

from __future__ import annotations

import pytest

from shardstream.errors import RecordFormatError
from shardstream.pipeline import DataPipeline, SimpleShardList, ignore_and_continue, shuffle
from shardstream.pipeline import cbors_to_samples, jsonl_to_samples, msgpack_to_samples, records_to_samples
from shardstream.streams import RecordWriter

STAGES = {"msgpack": msgpack_to_samples, "cbors": cbors_to_samples, "jsonl": jsonl_to_samples}


@pytest.fixture
def files(tmp_path):
    def make(fmt, nfiles=3, per_file=6):
        paths = []
        for f in range(nfiles):
            path = str(tmp_path / f"part-{f}.{fmt}")
            with RecordWriter(path) as writer:
                for i in range(per_file):
                    writer.write({"file": f, "i": i})
            paths.append(path)
        return paths

    return make


@pytest.mark.parametrize("fmt", sorted(STAGES))
def test_reads_every_record_in_order(files, fmt):
    paths = files(fmt)
    records = list(DataPipeline(SimpleShardList(paths), STAGES[fmt]()))
    assert records == [{"file": f, "i": i} for f in range(3) for i in range(6)]
    assert list(DataPipeline(SimpleShardList(paths), records_to_samples())) == records  # format from the ending


@pytest.mark.parametrize("fmt", sorted(STAGES))
@pytest.mark.parametrize("stop", [0, 1, 5, 6, 13, 17])
def test_resume_mid_file_gives_the_same_rest(files, fmt, stop):
    paths = files(fmt)

    def pipeline():
        return DataPipeline(SimpleShardList(paths, seed=1), STAGES[fmt](), shuffle(4), seed=3)

    first = pipeline()
    it = iter(first)
    for _ in range(stop):
        next(it)
    state = first.state_dict()
    rest = list(it)
    again = pipeline()
    again.load_state_dict(state)
    assert list(again) == rest and len(rest) == 18 - stop


def test_a_truncated_file_goes_to_the_handler(files, tmp_path):
    paths = files("cbors")
    data = open(paths[1], "rb").read()
    open(paths[1], "wb").write(data[:-2])
    with pytest.raises(RecordFormatError) as info:
        list(DataPipeline(SimpleShardList(paths), cbors_to_samples()))
    assert info.value.url == paths[1] and info.value.record == 5
    kept = list(DataPipeline(SimpleShardList(paths), cbors_to_samples(handler=ignore_and_continue)))
    assert len(kept) == 6 + 5 + 6


def test_the_webdataset_readme_cbors_example(tmp_path, monkeypatch):
    import numpy as np

    import shardstream as wds

    monkeypatch.chdir(tmp_path)
    with RecordWriter("test.cbors") as writer:  # the README writes with cbor.dump((i, str(i)[-5:]), stream)
        for i in np.linspace(-5.0, 5.0, 1000):
            writer.write((float(i), str(i)[-5:]))
    dataset = wds.DataPipeline(wds.SimpleShardList("test.cbors"), wds.cbors_to_samples())
    data = list(iter(dataset))
    assert (len(data), data[0]) == (1000, [-5.0, "-5.0"])
