"""webdataset's environment and secure mode, honoured under webdataset's names and shardstream's (issue 12)."""

from __future__ import annotations

import pytest

import shardstream as wds
from shardstream.config import Settings
from shardstream.errors import ConfigError
from shardstream.io import gopen, open_url
from shardstream.io.rewrite import rewrite_url
from shardstream.io.urls import envsubst


@pytest.fixture
def shard(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"data")
    return path


@pytest.fixture
def secure(monkeypatch):
    import shardstream.utils

    monkeypatch.setattr(shardstream.utils, "enforce_security", True)


def test_settings_read_webdataset_names():
    s = Settings.from_env({"WDS_SECURE": "1", "WDS_CACHE": "/c", "WDS_CACHE_SIZE": "1G", "ALLOW_OBSOLETE": "1",
                           "GOPEN_REWRITE": "gs://b/=/mnt/b/;s3://=http://mirror/", "WDS_DATA": "/data"})
    assert (s.secure, s.cache_dir, s.cache_size, s.allow_obsolete) == (True, "/c", 1 << 30, True)
    assert s.url_rewrites == ("gs://b/=/mnt/b/", "s3://=http://mirror/")
    assert dict(s.url_vars) == {"DATA": "/data"}  # settings variables are not ${NAME} values


def test_shardstream_names_win():
    s = Settings.from_env({"SHARDSTREAM_CACHE_DIR": "/mine", "WDS_CACHE": "/theirs", "WDS_REWRITE": "a=b"})
    assert s.cache_dir == "/mine" and s.url_rewrites == ("a=b",)


def test_vars_in_shard_urls(monkeypatch, shard):
    monkeypatch.setenv("WDS_ROOT", str(shard.parent))
    assert envsubst("${ROOT}/a.bin") == str(shard)
    with pytest.raises(ConfigError, match="WDS_MISSING"):
        envsubst("${MISSING}/a.tar")


def test_gopen_rewrite(monkeypatch, shard):
    monkeypatch.setenv("GOPEN_REWRITE", f"remote://bucket/={shard.parent}/")
    with open_url("remote://bucket/a.bin") as f:
        assert f.read() == b"data"


def test_secure_mode_refuses_commands_and_local_files(secure, shard):
    for url in (str(shard), f"file:{shard}", "pipe:cat /etc/hostname"):
        with pytest.raises(ConfigError, match="secure mode"):
            open_url(url)
    with pytest.raises(ValueError, match="secure mode"):  # webdataset raises ValueError; ConfigError is one
        gopen(str(shard), "wb")
    with pytest.raises(ValueError, match="secure mode"):
        wds.autodecode.unpickle_loads(b"")
    with pytest.raises(ValueError, match="secure mode"):
        wds.Decoder(allow_unsafe=True)


def test_secure_mode_refuses_rewriting(monkeypatch):
    with pytest.raises(ConfigError, match="secure mode"):
        rewrite_url("gs://b/x.tar", Settings(secure=True, url_rewrites=("gs://b/=/mnt/",)))


def test_secure_mode_from_the_environment(monkeypatch, shard):
    import shardstream.utils

    monkeypatch.setattr(shardstream.utils, "enforce_security", None)  # the switch unset: the settings decide
    monkeypatch.setenv("WDS_SECURE", "1")
    with pytest.raises(ConfigError):
        open_url(str(shard))
    monkeypatch.setenv("WDS_SECURE", "0")
    with open_url(str(shard)) as f:
        assert f.read() == b"data"


def test_obsolete_functions_need_allow_obsolete(monkeypatch):
    with pytest.raises(wds.utils.ObsoleteException, match="ALLOW_OBSOLETE"):
        wds.cache.pipe_cleaner("pipe:curl -s https://host/a.tar")
    monkeypatch.setenv("ALLOW_OBSOLETE", "1")
    assert wds.cache.pipe_cleaner("pipe:curl -s https://host/a.tar") == "https://host/a.tar"
