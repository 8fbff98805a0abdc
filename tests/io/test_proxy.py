"""HTTP_PROXY / HTTPS_PROXY / NO_PROXY: http(s) shards and S3 reads go through a real forwarding proxy process on
loopback (fault_servers.ForwardProxy), which counts them; NO_PROXY hosts are reached directly."""

from __future__ import annotations

import pytest
from fault_servers import ForwardProxy
from remote_servers import BUCKET, RGW_KEYS, s3_settings_yaml, samples_of

from shardstream.config import Settings
from shardstream.errors import OpenError
from shardstream.io.proxy import Route


@pytest.fixture
def proxy():
    server = ForwardProxy()
    yield server
    server.stop()


def test_the_settings_read_the_standard_variables():
    env = {"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:2", "HTTPS_PROXY": "http://p:3",
           "NO_PROXY": "localhost,.internal"}
    s = Settings.from_env(env)
    assert (s.http_proxy, s.https_proxy, s.no_proxy) == ("http://lower:2", "http://p:3", "localhost,.internal")
    route = Route(s.http_proxy, s.https_proxy, s.no_proxy)
    assert route.proxy_for("http", "a.internal") is None and route.proxy_for("https", "x.org") == "http://p:3"
    assert Route("http://p:1", no_proxy="*").proxy_for("http", "x.org") is None


@pytest.mark.parametrize("parts", ["64K", "8M"])
def test_http_shards_go_through_the_proxy(nginx, expected, proxy, monkeypatch, parts):
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", parts)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    assert samples_of([nginx.url(f"data/shard-{i:06d}.tar") for i in range(4)]) == expected
    assert len(proxy.targets) >= 1 and set(proxy.targets) == {f"127.0.0.1:{nginx.port}"}


def test_no_proxy_hosts_are_reached_directly(nginx, expected, proxy, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert samples_of([nginx.url("data/shard-000000.tar")]) == expected[:12]
    assert proxy.targets == []


def test_proxy_credentials_from_the_proxy_url(nginx, expected, monkeypatch, fast_retries):
    guarded = ForwardProxy(auth=("bob", "s3cret"))
    try:
        monkeypatch.setenv("HTTP_PROXY", guarded.url)
        with pytest.raises(OpenError, match="407"):
            samples_of([nginx.url("data/shard-000000.tar")])
        monkeypatch.setenv("HTTP_PROXY", guarded.url.replace("http://", "http://bob:s3cret@"))
        assert samples_of([nginx.url("data/shard-000000.tar")]) == expected[:12]
        assert guarded.refused >= 1 and guarded.targets
    finally:
        guarded.stop()


def test_s3_reads_go_through_the_proxy(rgw, expected, proxy, monkeypatch):
    """The signed-URL reads (the default) and the s3fs reads (S3 with TLS settings of its own)."""
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([(BUCKET, rgw.endpoint, RGW_KEYS)]))
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    urls = [f"s3://{BUCKET}/data/shard-{i:06d}.tar" for i in range(2)]
    assert samples_of(urls) == expected[:24]
    signed = len(proxy.targets)
    assert signed >= 1 and set(proxy.targets) == {f"127.0.0.1:{rgw.port}"}
    tls = s3_settings_yaml([(BUCKET, rgw.endpoint, RGW_KEYS)]) + "    options: {client_kwargs: {verify: false}}\n"
    monkeypatch.setenv("SHARDSTREAM_STORAGE", tls)
    assert samples_of(urls) == expected[:24]
    assert len(proxy.targets) > signed
