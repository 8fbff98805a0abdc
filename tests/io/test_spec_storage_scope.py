"""A dataset spec's storage settings apply to the spec's own URLs, while its dataset exists: never to another URL
of the same bucket that the program reads with its own settings."""

from __future__ import annotations

import gc
from urllib.parse import urlsplit

import pytest
from fault_servers import StubHTTP

from shardstream.config import Settings
from shardstream.io import open_url
from shardstream.io.s3 import sigv4_url
from shardstream.io.storage_config import StorageConfig, StorageRule, load_storage_config
from shardstream.spec import SpecShards, load_spec, spec_pipeline
from shardstream.testing import write_shards

PROCESS = "storage: [{bucket: data, endpoint_url: 'http://127.0.0.1:7001', key: K, secret: S}]"


def spec_dict(**source_storage):
    return {"storage": [{"bucket": "data", "endpoint_url": "http://127.0.0.1:7003", "key": "K3", "secret": "S3"}],
            "sources": [{"name": "own", "shards": "s3://data/spec-{0..1}.tar", "samples": 2,
                         "storage": {"endpoint_url": "http://127.0.0.1:7002", "key": "K2", "secret": "S2",
                                     **source_storage}},
                        {"name": "shared", "shards": "s3://data/other-{0..1}.tar", "samples": 2}]}


def port_for(url: str, settings: Settings) -> int | None:
    """The endpoint port that ``url`` would be fetched from (the URL signed for it)."""
    return urlsplit(sigv4_url(url, settings) or "").port


@pytest.fixture
def process_settings(monkeypatch) -> Settings:
    monkeypatch.setenv("SHARDSTREAM_STORAGE", PROCESS)
    return Settings.from_env()


def test_spec_settings_apply_to_its_own_urls_only(process_settings):
    spec = load_spec(spec_dict())
    shard_lists = [SpecShards(source, spec.storage_rules()) for source in spec.sources]
    list(shard_lists[0])  # a worker adds them when iterating (made here: added already)
    assert port_for("s3://data/spec-0.tar", process_settings) == 7002  # the source's settings
    assert port_for("s3://data/spec-1.tar.ssidx", process_settings) == 7002  # and its index
    assert port_for("s3://data/other-1.tar", process_settings) == 7003  # the spec's settings, for its URLs
    for url in ("s3://data/mine.tar", "s3://data/spec-2.tar", "s3://data/spec-0.tarx/y", "s3://data/spec-"):
        assert port_for(url, process_settings) == 7001, url  # the program's own, in the same bucket
    del shard_lists
    gc.collect()
    assert port_for("s3://data/spec-0.tar", process_settings) == 7001  # gone with the dataset


def test_the_most_specific_rule_wins():
    broad = StorageRule("s3://data/", region="broad")
    spec_wide = StorageRule("s3://data/", region="spec", scope=frozenset({"s3://data/a.tar", "s3://data/b.tar"}))
    source = StorageRule("s3://", region="source", scope=frozenset({"s3://data/a.tar"}))
    longer = StorageRule("s3://data/a", region="longer")
    config = StorageConfig([broad, longer, spec_wide, source])
    assert [config.match(u).region for u in ("s3://data/a.tar", "s3://data/b.tar", "s3://data/c.tar",
                                             "s3://data/ab.tar")] == ["source", "spec", "broad", "longer"]
    assert StorageRule("s3://data/", scope=frozenset({"s3://data/a.tar"})) != StorageRule("s3://data/")


def test_rules_of_two_live_specs_and_of_the_process():
    first = load_spec({"sources": [{"shards": "s3://x/a.tar", "storage": {"region": "one"}}]})
    second = load_spec({"sources": [{"shards": "s3://x/b.tar", "storage": {"region": "two"}}]})
    owners = [SpecShards(s.sources[0], s.storage_rules()) for s in (first, second)]
    config = load_storage_config(Settings())
    assert config.match("s3://x/a.tar").region == "one" and config.match("s3://x/b.tar").region == "two"
    assert config.match("s3://x/c.tar") is None
    del owners[0]
    gc.collect()
    assert load_storage_config(Settings()).match("s3://x/a.tar") is None
    assert load_storage_config(Settings()).match("s3://x/b.tar").region == "two"


def test_a_program_url_in_the_spec_bucket_is_fetched_with_the_program_settings(monkeypatch, tmp_path):
    """End to end: the spec's shards come from the spec's endpoint, the program's own object of the same bucket
    from the program's endpoint (5542f61 fetched it from the spec's: a 404 there, or worse, the spec's data)."""
    spec_shard, own_shard = (write_shards(str(tmp_path / name), [3], {"txt": name})[0] for name in ("spec", "own"))
    with open(spec_shard, "rb") as f1, open(own_shard, "rb") as f2:
        spec_bytes, own_bytes = f1.read(), f2.read()
    program, spec_server = StubHTTP({"data/mine.tar": own_bytes}), StubHTTP({"data/spec-0.tar": spec_bytes})
    try:
        monkeypatch.setenv("SHARDSTREAM_STORAGE", f"storage: [{{bucket: data, endpoint_url: '{program.url()}', "
                                                  "key: K, secret: S}]")
        dataset = spec_pipeline({"sources": [{"shards": "s3://data/spec-0.tar", "samples": 3, "storage": {
            "endpoint_url": spec_server.url().rstrip("/"), "key": "K2", "secret": "S2"}}]}, shardshuffle=False)
        assert [s["txt"] for s in dataset] == [b"spec"] * 3
        with open_url("s3://data/mine.tar") as f:
            assert f.read() == own_bytes
        assert {p for p, _ in spec_server.requests} == {"data/spec-0.tar"}
        assert {p for p, _ in program.requests} == {"data/mine.tar"}
    finally:
        program.stop()
        spec_server.stop()
