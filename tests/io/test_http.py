"""http(s):// shards from a real nginx (Range support) on loopback: reading, headers, auth, redirects, errors."""

from __future__ import annotations

import socket

import pytest
from fault_servers import FaultProxy
from remote_servers import Nginx, samples_of

from shardstream.errors import OpenError
from shardstream.io import open_url
from shardstream.io.http import HttpStream
from shardstream.io.ranged import RangedStream


@pytest.mark.parametrize("parts", ["one stream", "64K parts", "8M parts"])
def test_samples_over_http_equal_the_local_ones(nginx, expected, monkeypatch, parts):
    if parts == "one stream":
        monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "1")
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", parts.split()[0] if "parts" in parts else "8M")
    urls = [nginx.url(f"data/shard-{i:06d}.tar") for i in range(4)]
    assert samples_of(urls) == expected


def test_webdataset_reads_http_urls_with_brace_expansion(nginx, expected):
    from shardstream.dataset import WebDataset

    ds = WebDataset(nginx.url("data/shard-{000000..000003}.tar"), shardshuffle=False)
    got = [{k: v for k, v in s.items() if k != "__url__"} for s in ds]
    assert got == expected


def test_stream_reports_size_and_validators(nginx, local_shards):
    with open_url(nginx.url("data/shard-000000.tar")) as f:
        assert isinstance(f, RangedStream)
        data = f.read()
        assert f.size == len(data) and f.etag and f.last_modified and f.requests >= 1
    with open(local_shards[0], "rb") as local:
        assert data == local.read()


def test_resume_uses_range_from_the_exact_offset(nginx, local_shards):
    """Break the connection by hand in the middle: the rest comes from one Range request (206)."""
    with open(local_shards[1], "rb") as local:
        want = local.read()
    f = HttpStream(nginx.url("data/shard-000001.tar"), backoff=0)
    head = f.read(123_457)
    f._resp.fp.raw._sock.shutdown(socket.SHUT_RDWR)  # the connection dies under the response
    rest = f.read()
    assert head + rest == want and f.resumes == 1 and f.requests == 2


def test_missing_shard_is_an_open_error_without_retries(nginx):
    sleeps = []
    with pytest.raises(OpenError, match="404 Not Found") as info:
        HttpStream(nginx.url("data/nope.tar"), sleep=sleeps.append)
    assert info.value.url.endswith("nope.tar") and sleeps == []


def test_headers_from_the_environment(nginx, monkeypatch, local_shards):
    url = nginx.url("private/shard-000000.tar")
    with pytest.raises(OpenError, match="401"):
        open_url(url)
    monkeypatch.setenv("SHARDSTREAM_HTTP_HEADERS", f"X-Token: {Nginx.TOKEN}")
    with open_url(url) as f, open(local_shards[0], "rb") as local:
        assert f.read() == local.read()


def test_headers_from_the_storage_settings_of_the_prefix(nginx, monkeypatch, tmp_path, expected):
    settings = tmp_path / "storage.toml"
    settings.write_text(f'[[storage]]\nprefix = "{nginx.url("private/")}"\nheaders = {{X-Token = "{Nginx.TOKEN}"}}\n')
    monkeypatch.setenv("SHARDSTREAM_STORAGE_CONFIG", str(settings))
    assert samples_of([nginx.url(f"private/shard-{i:06d}.tar") for i in range(4)]) == expected


def test_basic_auth_from_the_url_and_no_password_in_messages(nginx, local_shards):
    user, password = Nginx.BASIC
    url = nginx.url("basic/shard-000002.tar").replace("http://", f"http://{user}:{password}@")
    with open_url(url) as f, open(local_shards[2], "rb") as local:
        assert f.read() == local.read()
    bad = url.replace(password, "wrong-password")
    with pytest.raises(OpenError, match="401") as info:
        open_url(bad)
    assert "wrong-password" not in str(info.value) and "***" in str(info.value)


def test_redirects_are_followed(nginx, local_shards):
    with open_url(nginx.url("moved/data/shard-000003.tar")) as f, open(local_shards[3], "rb") as local:
        assert f.read() == local.read()


def test_dataloader_workers_read_http_shards(nginx, expected):
    torch = pytest.importorskip("torch")
    from shardstream.dataset import WebDataset

    ds = WebDataset(nginx.url("data/shard-{000000..000003}.tar"), shardshuffle=False)
    loader = torch.utils.data.DataLoader(ds, num_workers=2, batch_size=None)
    got = sorted((s["__key__"], s["bin"]) for s in loader)
    assert got == sorted((s["__key__"], s["bin"]) for s in expected)


def test_a_cached_dataset_works_offline(nginx, tmp_path, expected, fast_retries):
    """First epoch through a proxy that then disappears: the second epoch comes from the cache."""
    from shardstream.dataset import WebDataset

    proxy = FaultProxy(nginx.port, weights={"pass": 1})
    urls = proxy.url("data/shard-{000000..000003}.tar")
    ds = WebDataset(urls, shardshuffle=False, cache_dir=str(tmp_path / "cache"))
    first = [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in ds]
    proxy.stop()
    with pytest.raises(OpenError):
        open_url(proxy.url("data/shard-000000.tar"))  # the server is gone
    second = [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in ds]
    assert first == second == expected
    assert len(list((tmp_path / "cache").glob("*.tar"))) == 4
