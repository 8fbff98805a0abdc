"""Fixtures of the remote-shard tests: shards, and real servers started once per session (see remote_servers)."""

from __future__ import annotations

import os

import pytest
from remote_servers import (
    BUCKET,
    CEPH_BINARIES,
    RGW_KEYS,
    SHARDS,
    Nginx,
    RadosGW,
    build_shard,
    missing,
    moto_server,
    s3_settings_yaml,
    samples_of,
    upload,
)


@pytest.fixture(scope="session")
def shard_dir(tmp_path_factory) -> str:
    """A directory with ``data/shard-00000{0..3}.tar`` (also under private/ and basic/ for nginx)."""
    root = tmp_path_factory.mktemp("shards")
    for sub in ("data", "private", "basic"):
        os.makedirs(root / sub)
        for shard in range(SHARDS):
            build_shard(str(root / sub / f"shard-{shard:06d}.tar"), shard)
    os.chmod(root, 0o755)
    return str(root)


@pytest.fixture(scope="session")
def local_shards(shard_dir) -> list[str]:
    return [os.path.join(shard_dir, "data", f"shard-{i:06d}.tar") for i in range(SHARDS)]


@pytest.fixture(scope="session")
def expected(local_shards) -> list[dict]:
    return samples_of(local_shards)


@pytest.fixture(scope="session")
def nginx(shard_dir, tmp_path_factory):
    reason = missing("nginx")
    if reason:
        pytest.skip(reason)
    server = Nginx(shard_dir, str(tmp_path_factory.mktemp("nginx")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def radosgw(tmp_path_factory):
    """A real S3 service (Ceph RadosGW); ~11 s to start, once per session."""
    reason = missing(*CEPH_BINARIES)
    if reason:
        pytest.skip(reason)
    server = RadosGW(str(tmp_path_factory.mktemp("rgw")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def rgw(radosgw, local_shards):
    """RadosGW with the four shards in ``s3://shards/data/``."""
    upload(radosgw.endpoint, RGW_KEYS, BUCKET, {f"data/shard-{i:06d}.tar": p for i, p in enumerate(local_shards)})
    return radosgw


@pytest.fixture
def rgw_settings(rgw, monkeypatch):
    """The process settings point ``s3://shards/`` at RadosGW (as a user's storage settings would)."""
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([(BUCKET, rgw.endpoint, RGW_KEYS)]))
    return rgw


@pytest.fixture(scope="session")
def moto_s3():
    """A moto S3 server on loopback (a fast mock; never the only S3 of the suite). Yields its endpoint."""
    pytest.importorskip("moto.server")
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def fast_retries(monkeypatch):
    """Retries with millisecond backoff and a short timeout, through the environment (as users set them)."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_BACKOFF", "0.001")
    monkeypatch.setenv("SHARDSTREAM_HTTP_TIMEOUT", "1")
    monkeypatch.setenv("SHARDSTREAM_HTTP_RETRIES", "6")


@pytest.fixture(autouse=True)
def _no_prefetch_leaks():
    """A shard opened ahead for one test (io/prefetch.py guesses the next shard of a series) is closed when the
    test ends, so its requests never reach the servers, proxies or settings of the next test."""
    from shardstream.io import prefetch

    yield
    prefetch.forget()
