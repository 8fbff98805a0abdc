"""gs:// against a Google Cloud Storage emulator (fake-gcs-server, started once per session by gcs_server.py).

Streaming reads and the ranged block reader, ShardWriter writing objects, brace patterns and the CLI, the shard
cache, sidecar indexes (len(), IndexedDataset), a dataset spec with its own storage settings, typed errors that
hide the token, and reads through a proxy that cuts connections. The emulator checks no credentials: a request
denied for its token is played by a stub that answers 403."""

from __future__ import annotations

import http.server
import logging
import os
import threading

import pytest
from fault_servers import FaultProxy
from gcs_server import BUCKET, fake_gcs, settings_yaml  # noqa: F401 - fake_gcs: the session fixture
from remote_servers import LOOPBACK, free_port, samples_of

from shardstream.errors import ConfigError, OpenError
from shardstream.io import open_url
from shardstream.io.objectstore import ObjectStream, filesystem_for
from shardstream.testing import write_shards

SIZES = (6, 4, 5)
URLS = f"gs://{BUCKET}/data/shard-{{000000..000002}}.tar"
TOKEN = "ya29.not-a-real-token-4f9c2e"  # a raw OAuth access token, as a user's settings would hold one


def fields(shard, index, number):
    """Samples of a few kB to ~100 kB: a shard spans several 64 kB blocks."""
    return {"bin": bytes([number % 251]) * (1000 + 40_000 * (index % 3)), "cls": number, "json": {"n": number}}


def strip(samples):
    return [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in samples]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> list[str]:
    """Three small shards with their sidecar indexes."""
    return write_shards(tmp_path_factory.mktemp("gcs-local"), list(SIZES), fields, index=True)


@pytest.fixture(scope="module")
def gcs(fake_gcs, local):  # noqa: F811 - the session fixture, by name
    """The emulator with the shards and their indexes under ``gs://BUCKET/data/``."""
    files = {}
    for path in local:
        name = os.path.basename(path)
        files[f"data/{name}"] = path
        files[f"data/{name}.ssidx"] = path + ".ssidx"
    fake_gcs.upload(BUCKET, files)
    return fake_gcs


@pytest.fixture
def gcs_settings(gcs, monkeypatch):
    """The process settings send ``gs://BUCKET/`` to the emulator (as a user's storage settings would)."""
    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings_yaml(gcs.endpoint))
    return gcs


@pytest.fixture(scope="module")
def expected(local) -> list[dict]:
    return samples_of(local)


def test_webdataset_streams_gs_shards(gcs_settings, expected):
    from shardstream.dataset import WebDataset

    assert strip(WebDataset(URLS, shardshuffle=False)) == expected


def test_ranged_blocks_and_read_ahead_are_exact(gcs_settings, local):
    fs, path = filesystem_for(f"gs://{BUCKET}/data/shard-000001.tar")
    assert type(fs).__module__ == "gcsfs.core"  # not the gRPC-probing subclass: the emulator has no control plane
    with ObjectStream("gs://x", fs, path, block_size=65_536, prefetch=3) as f, open(local[1], "rb") as want_f:
        want = want_f.read()
        assert f.size == len(want) and f.etag and f.md5
        assert f.read(1000) + f.read(70_000) + f.read() == want


def test_the_first_block_is_small_and_the_next_ones_double(gcs_settings, local, monkeypatch):
    """The first bytes of an object come after a small request, not after a whole block (16 MiB by default)."""
    from shardstream.io import objectstore

    FIRST_BLOCK = 16 << 10  # noqa: N806 - scaled down with the shard (256 KiB by default)
    monkeypatch.setattr(objectstore, "FIRST_BLOCK", FIRST_BLOCK)
    fs, path = filesystem_for(f"gs://{BUCKET}/data/shard-000001.tar")
    with ObjectStream("gs://x", fs, path, block_size=4 * FIRST_BLOCK, prefetch=1) as f, open(local[1], "rb") as want_f:
        asked = []
        get = f._get
        f._get = lambda start, end: asked.append(end - start) or get(start, end)
        want = want_f.read()
        assert f.read() == want
    full = [FIRST_BLOCK, 2 * FIRST_BLOCK, 4 * FIRST_BLOCK]
    assert len(want) > FIRST_BLOCK and asked[:-1] == (full + [full[-1]] * len(asked))[:len(asked) - 1]
    assert sum(asked) == len(want)


def test_shardwriter_writes_gs_objects(gcs_settings):
    from shardstream.writer import ShardWriter

    written = [{"__key__": f"k{i:03d}", "bin": bytes([i]) * 30_000, "cls": i} for i in range(7)]
    with ShardWriter(f"gs://{BUCKET}/out/part-%06d.tar", maxcount=4) as sink:
        for sample in written:
            sink.write(sample)
    assert sink.shards == [f"gs://{BUCKET}/out/part-00000{i}.tar" for i in range(2)]
    got = samples_of(sink.shards)
    assert [(s["__key__"], s["bin"], int(s["cls"])) for s in got] == [(w["__key__"], w["bin"], w["cls"])
                                                                        for w in written]


def test_the_cli_lists_gs_shards_named_by_a_brace_pattern(gcs_settings, expected, capsys):
    from shardstream.cli import main

    assert main(["ls", f"gs://{BUCKET}/data/shard-000000.tar"]) == 0
    assert capsys.readouterr().out.startswith(f"{expected[0]['__key__']}\tbin:1000 ")
    assert main(["info", "--json", URLS]) == 0
    assert str(len(expected)) in capsys.readouterr().out


def test_the_cache_downloads_once_then_reads_locally(gcs_settings, monkeypatch, tmp_path, expected):
    from shardstream.dataset import WebDataset

    assert strip(WebDataset(URLS, shardshuffle=False, cache_dir=str(tmp_path))) == expected
    assert len([n for n in os.listdir(tmp_path) if not n.endswith(".tmp")]) >= len(SIZES)
    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings_yaml(f"http://{LOOPBACK}:{free_port()}"))  # nothing there
    assert strip(WebDataset(URLS, shardshuffle=False, cache_dir=str(tmp_path))) == expected


def test_sidecar_indexes_give_len_and_random_access(gcs_settings, expected):
    from shardstream.dataset import WebDataset
    from shardstream.indexed import IndexedDataset

    assert len(WebDataset(URLS)) == sum(SIZES)
    with pytest.raises(ConfigError, match="random access reads local files.*register_source"):
        IndexedDataset([f"gs://{BUCKET}/data/shard-{i:06d}.tar" for i in range(len(SIZES))])  # no remote source


def test_a_spec_with_its_own_gcs_settings(gcs, monkeypatch, expected):
    from shardstream.dataset import WebDataset

    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings_yaml(f"http://{LOOPBACK}:{free_port()}"))  # the program's
    spec = {"storage": [{"prefix": f"gs://{BUCKET}/", "endpoint_url": gcs.endpoint, "token": "anon"}],
            "sources": [{"name": "gcs", "shards": URLS, "samples": sum(SIZES)}]}
    got = list(WebDataset(spec, shardshuffle=False))
    assert sorted(s["__key__"] for s in got) == sorted(s["__key__"] for s in expected)


def test_missing_objects_and_buckets_are_open_errors_without_the_token(gcs, monkeypatch, caplog):
    monkeypatch.setenv("FETCH_RAW_TOKEN_EXPIRY", "false")  # gcsfs sends the raw token as it is (no lookup)
    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings_yaml(gcs.endpoint, token=TOKEN) + settings_yaml(
        gcs.endpoint, "no-such-bucket", TOKEN).replace("storage:\n", ""))
    caplog.set_level(logging.DEBUG)
    for url in (f"gs://{BUCKET}/data/nope.tar", "gs://no-such-bucket/a.tar"):
        with pytest.raises(OpenError) as info:
            open_url(url).read()
        assert url in str(info.value) and TOKEN not in str(info.value)
    assert TOKEN not in caplog.text


def test_credentials_that_fail_are_a_config_error_without_the_token(gcs, monkeypatch):
    """gcsfs checks a raw token with Google's token service when the filesystem is made (offline here: it fails)
    and quotes the token in its error: shardstream's error names the URL, never the token."""
    monkeypatch.setenv("FETCH_RAW_TOKEN_EXPIRY", "true")
    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings_yaml(gcs.endpoint, token=TOKEN + "-2"))
    url = f"gs://{BUCKET}/data/shard-000000.tar"
    with pytest.raises(ConfigError) as info:
        open_url(url)
    assert url in str(info.value) and TOKEN not in str(info.value) and "credentials" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__  # the cause quotes the token


class _Denied(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = b'{"error": {"code": 403, "message": "caller does not have storage.objects.get access"}}'
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_denied_request_is_an_open_error_at_once(monkeypatch):
    """A 403 (what GCS answers a token without access; the emulator checks none) fails the open, unretried."""
    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), _Denied)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("FETCH_RAW_TOKEN_EXPIRY", "false")
    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings_yaml(f"http://{LOOPBACK}:{server.server_port}",
                                                            token=TOKEN))
    url = f"gs://{BUCKET}/data/shard-000000.tar"
    try:
        with pytest.raises(OpenError, match="Forbidden") as info:
            open_url(url)
    finally:
        server.shutdown()
        server.server_close()
    assert url in str(info.value) and TOKEN not in str(info.value)


def test_reads_resume_after_dropped_connections(gcs, monkeypatch, expected):
    proxy = FaultProxy(gcs.port, seed=5, weights={"pass": 4, "cut": 1}, cut_range=(3000, 60_000))
    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings_yaml(proxy.url().rstrip("/")))
    monkeypatch.setenv("SHARDSTREAM_BLOCK_SIZE", "64K")
    try:
        assert samples_of([f"gs://{BUCKET}/data/shard-{i:06d}.tar" for i in range(len(SIZES))]) == expected
    finally:
        proxy.stop()
    assert proxy.counts.get("cut", 0) >= 1, proxy.counts
