"""The network says what it does (docs/logging.md): every retry is a record with its cause and attempt, a resumed
read says where it resumed; and no record, error or CLI line ever shows a credential (a canary secret is looked
for at every level).
"""

from __future__ import annotations

import logging

import pytest
from fault_servers import StubHTTP
from remote_servers import build_shard, s3_settings_yaml, samples_of

import shardstream as wds
from shardstream.cli import main
from shardstream.config import Settings
from shardstream.io.http import HttpStream

SHARDS = 3
#: the canary: a secret that must never be shown, whatever the level
CANARY = "Canary7Secret9Value"


@pytest.fixture
def shards(tmp_path) -> dict[str, bytes]:
    files = {}
    for i in range(SHARDS):
        path = build_shard(str(tmp_path / f"shard-{i:06d}.tar"), i, count=5)
        with open(path, "rb") as f:
            files[f"data/shard-{i:06d}.tar"] = files[f"bucket/data/shard-{i:06d}.tar"] = f.read()
    return files


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_HTTP_BACKOFF", "0.001")
    monkeypatch.setenv("SHARDSTREAM_HTTP_RETRIES", "3")


def retry_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "retry 1 of 3" in r.getMessage()]


@pytest.mark.parametrize("connections", ["1", "4"])  # one stream (HttpStream), parallel parts (RangedStream)
def test_a_503_once_per_shard_is_one_retry_record_per_shard(shards, fast_retries, monkeypatch, caplog, connections):
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", connections)
    stub = StubHTTP(shards, fail_first=503)
    try:
        urls = [stub.url(f"data/shard-{i:06d}.tar") for i in range(SHARDS)]
        caplog.set_level(logging.DEBUG, logger="shardstream")
        got = list(wds.WebDataset(urls, shardshuffle=False))
    finally:
        stub.stop()
    assert len(got) == 5 * SHARDS
    retries = [r for r in retry_records(caplog) if ".tar: " in r.getMessage()]  # (not the sidecar index's)
    assert sorted(r.getMessage().partition(".tar: ")[0] + ".tar" for r in retries) == urls
    for record in retries:
        assert record.name == "shardstream.io.http" and record.levelno == logging.INFO
        assert "HTTP 503" in record.getMessage() and "at byte 0" in record.getMessage()


def test_a_broken_body_is_resumed_at_its_offset_and_says_so(shards, caplog):
    stub = StubHTTP(shards, short=1000, short_once=True)  # the first answer ends 1000 bytes early, then closes
    try:
        caplog.set_level(logging.INFO, logger="shardstream.io.http")
        url = stub.url("data/shard-000000.tar")
        data = HttpStream(url, backoff=0.001, retries=10).read()
    finally:
        stub.stop()
    assert data == shards["data/shard-000000.tar"]
    lines = [r.getMessage() for r in caplog.records]
    size = len(data)
    assert any(f"the body ended after {size - 1000} of {size} bytes" in line and "retry 1 of 10" in line
               for line in lines), lines
    assert f"{url}: resuming at byte {size - 1000} of {size}" in lines


# -- canary secrets ------------------------------------------------------------------------------------------


def assert_no_canary(caplog, *texts: str) -> None:
    shown = [r.getMessage() for r in caplog.records] + [logging.Formatter().format(r) for r in caplog.records]
    leaks = [text for text in [*shown, *texts] if CANARY in text]
    assert leaks == []


def test_a_password_in_a_url_is_in_no_record_nor_error(shards, fast_retries, caplog, capsys):
    stub = StubHTTP(shards, fail_first=503)
    try:
        url = stub.url("data/shard-000000.tar").replace("://", f"://alice:{CANARY}@")
        caplog.set_level(logging.DEBUG, logger="shardstream")
        assert len(list(wds.WebDataset(url, shardshuffle=False))) == 5
        missing = url.replace("shard-000000", "missing")
        with pytest.raises(wds.OpenError) as error:
            list(wds.WebDataset(missing, shardshuffle=False))
        assert main(["--debug", "ls", url.replace("shard-000000", "shard-000001")]) == 0
    finally:
        stub.stop()
    assert retry_records(caplog), "the retry was logged"
    out, err = capsys.readouterr()
    assert "alice:***@" in err  # the CLI's debug lines show the retry, redacted
    assert_no_canary(caplog, str(error.value), repr(error.value), out, err)


def test_s3_keys_of_the_storage_settings_are_in_no_record_nor_error(shards, fast_retries, monkeypatch, caplog):
    stub = StubHTTP(shards, fail_first=503)
    try:
        settings = s3_settings_yaml([("bucket", stub.url(), (f"AKIA{CANARY}", f"secret-{CANARY}"))])
        monkeypatch.setenv("SHARDSTREAM_STORAGE", settings.replace("region:", f"token: tok-{CANARY}\n    region:"))
        assert Settings.from_env().storage  # the settings are read
        caplog.set_level(logging.DEBUG, logger="shardstream")
        url = "s3://bucket/data/shard-000001.tar"
        assert len(list(wds.WebDataset(url, shardshuffle=False))) == 5
        with pytest.raises(wds.OpenError) as error:
            list(wds.WebDataset("s3://bucket/data/missing.tar", shardshuffle=False))
    finally:
        stub.stop()
    assert retry_records(caplog)
    assert any("s3://bucket/data/shard-000001.tar" in r.getMessage() for r in retry_records(caplog))
    assert_no_canary(caplog, str(error.value), repr(error.value))


def test_a_signed_query_string_is_in_no_record_nor_error(shards, fast_retries, caplog):
    stub = StubHTTP(shards, fail_first=503)
    try:
        query = f"?X-Amz-Signature={CANARY}&X-Amz-Credential=AKIA{CANARY}%2F20250101&sig={CANARY}&part=1"
        url = stub.url("data/shard-000002.tar") + query
        caplog.set_level(logging.DEBUG, logger="shardstream")
        assert len(list(wds.WebDataset(url, shardshuffle=False))) == 5
        with pytest.raises(wds.OpenError) as error:
            list(wds.WebDataset(stub.url("data/missing.tar") + query, shardshuffle=False))
    finally:
        stub.stop()
    records = retry_records(caplog)
    assert records and all("X-Amz-Signature=***" in r.getMessage() for r in records)
    assert_no_canary(caplog, str(error.value), repr(error.value))


def test_the_cache_logs_hits_and_misses(shards, tmp_path, caplog):
    stub = StubHTTP(shards)
    try:
        caplog.set_level(logging.DEBUG, logger="shardstream.io.cache")
        url = stub.url("data/shard-000000.tar")
        for _ in range(2):
            assert len(list(wds.WebDataset(url, shardshuffle=False, cache_dir=str(tmp_path / "cache")))) == 5
    finally:
        stub.stop()
    lines = [r.getMessage().split(":")[0] for r in caplog.records]
    assert lines[:3] == ["cache miss", "cached http", "cache hit"], lines


def test_samples_of_a_flaky_server_are_those_of_the_shards(shards, fast_retries, tmp_path):
    stub = StubHTTP(shards, fail_first=503)
    try:
        got = samples_of([stub.url("data/shard-000000.tar")])
    finally:
        stub.stop()
    assert len(got) == 5
