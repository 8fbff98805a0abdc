"""Exact mixing of spec sources: exact counts every epoch, equal parts per worker, resume item for item.

The closing measurement of issue 16 is test_three_sources_over_ten_epochs_meet_the_spec_exactly and
test_resume_mid_epoch_is_exact (benchmarks/spec_mixing.py prints the same numbers as a table).
"""

from __future__ import annotations

import collections
import gc

import pytest
import yaml

import shardstream as wds
from shardstream.errors import ConfigError
from shardstream.indexed import index_dataset
from shardstream.io.storage_config import load_storage_config
from shardstream.pipeline import ExactMix
from shardstream.spec import spec_pipeline
from shardstream.streams import RecordWriter
from shardstream.testing import write_shards

PROPORTIONS = {"a": 0.5, "b": 0.3, "c": 0.2}


@pytest.fixture
def spec(tmp_path):
    """Three sources of different sizes (one of them JSON-lines records), proportions 0.5 / 0.3 / 0.2 of 200."""
    a = write_shards(tmp_path / "a", [40, 40, 40], {"src": "a"})
    b = write_shards(tmp_path / "b", [25, 25], {"src": "b"})
    c = []
    for f in range(2):
        c.append(str(tmp_path / f"c-{f}.jsonl"))
        with RecordWriter(c[-1]) as writer:
            for i in range(15):
                writer.write({"src": "c", "__key__": f"c{f}-{i}"})
    return {"seed": 5, "epoch_size": 200, "sources": [
        {"name": "a", "shards": a, "proportion": 0.5, "fields": ["src"]},
        {"name": "b", "shards": b, "proportion": 0.3, "fields": ["src"]},
        {"name": "c", "shards": c, "proportion": 0.2}]}


def source(sample):
    value = sample["src"]
    return value.decode() if isinstance(value, bytes) else value


def test_three_sources_over_ten_epochs_meet_the_spec_exactly(spec):
    mix = spec_pipeline(spec, shardshuffle=True)
    orders = []
    for epoch in range(10):
        mix.set_epoch(epoch)
        samples = list(mix)
        counts = collections.Counter(source(s) for s in samples)
        assert len(samples) == 200
        assert {k: counts[k] / 200 for k in PROPORTIONS} == PROPORTIONS  # exactly, every epoch
        orders.append(tuple((source(s), s["__key__"]) for s in samples))
    assert len(set(orders)) == 10  # every epoch another order (schedule phases and shard order)


@pytest.mark.parametrize("stop", [1, 57, 150, 199])
def test_resume_mid_epoch_is_exact(spec, stop):
    def make():
        mix = spec_pipeline(spec, shardshuffle=True).shuffle(20)
        mix.set_epoch(3)
        return mix

    first = make()
    it = iter(first)
    for _ in range(stop):
        next(it)
    state = first.state_dict()
    rest = [(s["__key__"], source(s)) for s in it]
    again = make()
    again.load_state_dict(state)
    assert [(s["__key__"], source(s)) for s in again] == rest and len(rest) == 200 - stop


def test_sources_read_again_when_their_count_is_larger_than_their_data(spec):
    spec["sources"][2]["proportion"] = None
    spec["sources"][2]["repeat"] = 3  # 30 records, three times
    spec["sources"][2]["samples"] = 30
    spec["epoch_size"] = 90 + 50 + 30 * 3
    spec["sources"][0]["proportion"], spec["sources"][1]["proportion"] = None, None
    spec["sources"][0]["choose"], spec["sources"][1]["choose"] = 90, 50
    counts = collections.Counter(source(s) for s in spec_pipeline(spec))
    assert counts == {"a": 90, "b": 50, "c": 90}


def test_workers_get_equal_counts_with_the_proportions(spec):
    torch = pytest.importorskip("torch")
    mix = spec_pipeline(spec)
    loader = torch.utils.data.DataLoader(mix, batch_size=None, num_workers=2)
    got = [source(s) for s in loader]
    counts = collections.Counter(got)
    assert len(got) == 200 and {k: counts[k] for k in PROPORTIONS} == {"a": 100, "b": 60, "c": 40}
    per_worker = [collections.Counter(got[w::2]) for w in range(2)]  # the loader takes from workers in turn
    assert per_worker[0] == per_worker[1] == {"a": 50, "b": 30, "c": 20}


def test_field_selection_renames_and_storage_rules(spec, tmp_path):
    spec["sources"][0]["rename"] = {"origin": "src"}
    spec["sources"][0]["storage"] = {"endpoint_url": "http://127.0.0.1:1", "profile": "reader"}
    pipeline = spec_pipeline(spec)
    samples = list(pipeline)
    from_a = [s for s in samples if "origin" in s]
    assert len(from_a) == 100 and all(set(s) == {"__key__", "__url__", "origin"} for s in from_a)
    shard = str(tmp_path / "a" / "shard-000000.tar")
    rule = load_storage_config().match(shard)
    assert rule is not None and rule.profile == "reader"
    assert load_storage_config().match(str(tmp_path / "a" / "other.tar")) is None  # the source's URLs only
    gc.disable()  # gone with the pipeline itself, not at the next collection (nothing refers back to the mix)
    try:
        del pipeline, samples, from_a
        assert load_storage_config().match(shard) is None
        dataset = wds.WebDataset(spec)
        for _ in zip(range(3), dataset, strict=False):  # an iteration dropped mid-epoch
            pass
        assert load_storage_config().match(shard).profile == "reader"
        del dataset
        assert load_storage_config().match(shard) is None
    finally:
        gc.enable()


def test_one_pass_counts_come_from_the_indexes(tmp_path):
    a = write_shards(tmp_path / "a", [7, 5], {"src": "a"})
    b = write_shards(tmp_path / "b", [4], {"src": "b"})
    index_dataset(a + b, str(tmp_path / "all.json"))  # writes the sidecar indexes
    mix = spec_pipeline({"sources": [{"shards": a}, {"shards": b, "repeat": 2}]})
    assert mix.counts == [12, 8]
    with pytest.raises(ConfigError, match="needs `samples:`"):
        spec_pipeline({"sources": [{"shards": str(tmp_path / "nowhere.tar")}]})


def test_exact_mix_checks_its_state_and_counts():
    with pytest.raises(ConfigError, match="one count"):
        ExactMix([[1], [2]], counts=[1])
    mix = ExactMix([[1, 2], [3]], counts=[2, 1])
    it = iter(mix)
    next(it)
    state = mix.state_dict()
    other = ExactMix([[1, 2], [3]], counts=[1, 2])
    with pytest.raises(ConfigError, match="counts"):
        other.load_state_dict(state)
        list(other)
    with pytest.raises(ConfigError, match="has no item"):
        list(ExactMix([[], [1]], counts=[1, 1]))


def test_webdataset_reads_a_spec_file(spec, tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(spec))
    ds = wds.WebDataset(str(path), shardshuffle=True).shuffle(10).batched(20, collation_fn=None)
    for epoch in range(2):
        ds.set_epoch(epoch)
        samples = [s for batch in ds for s in batch]
        assert collections.Counter(source(s) for s in samples) == {"a": 100, "b": 60, "c": 40}
    assert wds.WebDataset(spec).seed == 5  # a dict too; the spec's seed unless one is given
    assert wds.WebDataset(spec, seed=1).seed == 1


def test_a_packed_source_reads_as_its_tuple_would(spec, tmp_path, monkeypatch):
    """A source whose ``shards:`` is one long numeric range is kept packed (long patterns only; lowered here):
    the mix, its resume state and a spec file's relative paths read the same as with the tuple of URLs."""
    from shardstream.io.packed import PackedUrls
    from shardstream.spec import load_spec, parse

    assert spec["sources"][0]["shards"] == [str(tmp_path / "a" / f"shard-{i:06d}.tar") for i in range(3)]
    spec["sources"][0]["shards"] = str(tmp_path / "a" / "shard-{000000..000002}.tar")
    want = [list(map(source, spec_pipeline(spec, shardshuffle=True)))]
    monkeypatch.setattr(parse, "PACK_FROM", 2)
    assert isinstance(load_spec(spec).sources[0].urls, PackedUrls)
    assert [list(map(source, spec_pipeline(spec, shardshuffle=True)))] == want
    path = tmp_path / "a" / "mix.yaml"
    path.write_text(yaml.safe_dump({**spec, "sources": [{"name": "a", "shards": "shard-{000000..000002}.tar",
                                                                   "samples": 120}]}))
    urls = load_spec(str(path)).sources[0].urls
    assert isinstance(urls, PackedUrls) and list(urls) == [str(tmp_path / "a" / f"shard-{i:06d}.tar") for i in range(3)]
    assert len(list(wds.WebDataset(str(path)))) == 120

