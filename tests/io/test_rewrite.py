"""URL rewriting (prefix rules, first match wins) and AIStore: ais:// URLs and routing other schemes.

No AIStore server can be installed here: the AIStore tests run against StubHTTP's emulation of the gateway
(``GET /v1/objects/BUCKET/OBJ?provider=P`` answered with a 307 redirect to a target) and the target (which
serves the object with Range support)."""

from __future__ import annotations

import pytest
from fault_servers import FaultProxy, StubHTTP
from remote_servers import samples_of

from shardstream.config import Settings
from shardstream.errors import ConfigError, OpenError
from shardstream.io import open_url
from shardstream.io.aistore import ais_url
from shardstream.io.rewrite import RewriteRules, rewrite_url


def test_first_matching_rule_wins_and_applies_once():
    rules = RewriteRules.parse(["gs://b/x/=/mnt/x/", "gs://b/=/mnt/b/", "/mnt/=/never/"])
    assert rules("gs://b/x/1.tar") == "/mnt/x/1.tar"
    assert rules("gs://b/y/1.tar") == "/mnt/b/y/1.tar"
    assert rules("s3://b/1.tar") == "s3://b/1.tar"


def test_rules_from_the_environment(monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_URL_REWRITES", "gs://bucket/=/mnt/data/; s3://x/=http://mirror/x/")
    assert rewrite_url("gs://bucket/a.tar") == "/mnt/data/a.tar"
    assert rewrite_url("s3://x/a.tar") == "http://mirror/x/a.tar"
    assert rewrite_url("other/a.tar") == "other/a.tar"


def test_bad_rule_is_a_config_error():
    with pytest.raises(ConfigError, match="FROM=TO"):
        rewrite_url("a", Settings(url_rewrites=("no-equals-sign",)))


def test_open_url_and_the_pipeline_apply_the_rules(monkeypatch, shard_dir, expected):
    monkeypatch.setenv("SHARDSTREAM_URL_REWRITES", f"gs://my-bucket/={shard_dir}/data/")
    with open_url("gs://my-bucket/shard-000000.tar") as f:
        assert f.read(5) == b"s00-0"
    assert samples_of([f"gs://my-bucket/shard-{i:06d}.tar" for i in range(4)]) == expected


def test_rewrite_to_an_http_mirror(monkeypatch, nginx, expected):
    monkeypatch.setenv("SHARDSTREAM_URL_REWRITES", f"s3://dataset/={nginx.url('data/')}")
    assert samples_of([f"s3://dataset/shard-{i:06d}.tar" for i in range(4)]) == expected


def test_ais_urls():
    assert ais_url("ais://b/dir/a b.tar", "http://gw:1") == "http://gw:1/v1/objects/b/dir/a%20b.tar?provider=ais"
    assert ais_url("s3://b/a.tar", "https://gw") == "https://gw/v1/objects/b/a.tar?provider=aws"
    assert ais_url("az://c/a.tar", "http://gw").endswith("provider=azure")
    with pytest.raises(ConfigError, match="AIS_ENDPOINT"):
        ais_url("ais://b/a.tar", None)
    with pytest.raises(ConfigError, match="bucket and an object"):
        ais_url("ais://b", "http://gw")
    with pytest.raises(ConfigError):
        ais_url("http://x/a.tar", "http://gw")


@pytest.fixture
def ais(local_shards):
    """An emulated AIStore gateway + target holding the shards in ``ais://train`` and ``gcp://public``."""
    files = {}
    for i, path in enumerate(local_shards):
        with open(path, "rb") as f:
            data = f.read()
        files[f"ais/train/shard-{i:06d}.tar"] = files[f"gcp/public/shard-{i:06d}.tar"] = data
    stub = StubHTTP(files, ais=True)
    yield stub
    stub.stop()


def test_ais_scheme_reads_through_the_gateway(monkeypatch, ais, expected):
    monkeypatch.setenv("AIS_ENDPOINT", ais.url())
    assert samples_of([f"ais://train/shard-{i:06d}.tar" for i in range(4)]) == expected
    paths = [p for p, _ in ais.requests]
    assert "v1/objects/train/shard-000000.tar" in paths and "target/ais/train/shard-000000.tar" in paths


def test_chosen_schemes_are_routed_through_aistore(monkeypatch, ais, expected):
    monkeypatch.setenv("AIS_ENDPOINT", ais.url())
    monkeypatch.setenv("SHARDSTREAM_USE_AIS_FOR", "gs")
    assert samples_of([f"gs://public/shard-{i:06d}.tar" for i in range(4)]) == expected
    assert all(p.startswith(("v1/objects/public/", "target/gcp/public/")) for p, _ in ais.requests)


def test_ais_reads_resume_through_redirects(monkeypatch, ais, local_shards, fast_retries):
    """Broken connections in front of the gateway: every resume goes through the gateway again."""
    proxy = FaultProxy(ais.port, seed=5, weights={"cut": 3, "503": 1}, cut_range=(200, 120_000))
    monkeypatch.setenv("AIS_ENDPOINT", proxy.url())
    try:
        with open_url("ais://train/shard-000001.tar") as f, open(local_shards[1], "rb") as local:
            assert f.read() == local.read() and f.resumes >= 1
    finally:
        proxy.stop()


def test_missing_ais_object_is_an_open_error(monkeypatch, ais):
    monkeypatch.setenv("AIS_ENDPOINT", ais.url())
    with pytest.raises(OpenError, match="404"):
        open_url("ais://train/nope.tar")


@pytest.mark.parametrize("variable", ["SHARDSTREAM_URL_REWRITES", "GOPEN_REWRITE"])
def test_rules_are_separated_by_semicolons_and_may_hold_spaces(variable):
    """As documented (and as webdataset reads GOPEN_REWRITE): ';' separates rules, a space inside a rule is kept
    (a local path may hold one), spaces around a rule are not; a newline separates rules too."""
    settings = Settings.from_env({variable: " gs://b/=/mnt/My Data/ ;s3://x/=/mnt/x/;\nhttp://h/=/mnt/h/\n"})
    assert settings.url_rewrites == ("gs://b/=/mnt/My Data/", "s3://x/=/mnt/x/", "http://h/=/mnt/h/")
    assert rewrite_url("gs://b/a b.tar", settings) == "/mnt/My Data/a b.tar"
    assert rewrite_url("http://h/c.tar", settings) == "/mnt/h/c.tar"
