"""az:// and abfs:// against a real Azure Blob Storage protocol server: Azurite, started once per session
(azure_server.py; the tests skip, saying why, only when Azurite, node or adlfs is missing).

Streaming reads and the block reader's read-ahead, writing with ShardWriter, brace patterns, globs and the CLI,
the shard cache, sidecar indexes (len(), IndexedDataset), dataset specs with per-container settings, typed
errors that never show the account key, and reads resumed through a proxy that cuts connections."""

from __future__ import annotations

import gc
import json
import logging

import pytest
from azure_server import (  # noqa: F401 - fixtures
    ACCOUNT,
    ACCOUNT_KEY,
    CONTAINER,
    SHARDS,
    az_data,
    az_expected,
    az_local,
    az_settings,
    azurite,
    storage_yaml,
)
from fault_servers import FaultProxy
from remote_servers import free_port, samples_of

import shardstream as wds
from shardstream.errors import ConfigError, OpenError, WriteError
from shardstream.io import open_url
from shardstream.io.objectstore import ObjectStream, filesystem_for
from shardstream.io.storage_config import StorageRule

DATA = f"az://{CONTAINER}/data/shard-{{000000..{SHARDS - 1:06d}}}.tar"


def strip(samples):
    return [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in samples]


def test_webdataset_streams_the_shards_as_they_are_locally(az_settings, az_expected):
    assert strip(wds.WebDataset(DATA, shardshuffle=False)) == az_expected


def test_abfs_urls_name_the_same_blobs(az_data, monkeypatch, az_expected):
    monkeypatch.setenv("SHARDSTREAM_STORAGE", storage_yaml("abfs://", az_data.connection_string()))
    assert samples_of(wds.expand_urls(DATA.replace("az://", "abfs://"))) == az_expected


def test_small_blocks_read_ahead_in_parallel_are_exact(az_settings, az_local):
    fs, path = filesystem_for(f"az://{CONTAINER}/data/shard-000001.tar")
    with ObjectStream("az://x", fs, path, block_size=65_536, prefetch=4) as f, open(az_local[1], "rb") as local:
        want = local.read()
        assert f.size == len(want) > 4 * 65_536 and f.etag
        assert f.md5 is None or len(f.md5) == 32
        assert f.read(1000) + f.read(70_000) + f.read() == want


def test_shardwriter_writes_to_az_and_reads_back(az_settings):
    written = [{"__key__": f"k{i:03d}", "bin": bytes([i]) * 50_000, "cls": i} for i in range(10)]
    with wds.ShardWriter(f"az://{CONTAINER}/written/part-%06d.tar", maxcount=4) as sink:
        for sample in written:
            sink.write(sample)
    assert sink.shards == [f"az://{CONTAINER}/written/part-00000{i}.tar" for i in range(3)]
    got = samples_of(sink.shards)
    assert [(s["__key__"], s["bin"], int(s["cls"])) for s in got] == [
        (w["__key__"], w["bin"], w["cls"]) for w in written]


def test_a_failed_write_publishes_nothing(az_settings):
    with pytest.raises(RuntimeError, match="boom"):
        with wds.TarWriter(f"az://{CONTAINER}/failed/a.tar") as sink:
            sink.write({"__key__": "a", "bin": b"x" * 1000})
            raise RuntimeError("boom")
    assert not az_settings.filesystem().exists(f"{CONTAINER}/failed/a.tar")


def test_cli_lists_brace_patterns_of_az_shards(az_settings, az_expected, capsys):
    from shardstream.cli import main

    assert main(["ls", "--json", DATA]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["key"] for line in lines] == [s["__key__"] for s in az_expected]
    assert {line["url"] for line in lines} == set(wds.expand_urls(DATA))


def test_cli_lists_the_shards_a_glob_names_in_the_container(az_settings, capsys):
    from shardstream.cli import main

    assert main(["info", "--json", f"az://{CONTAINER}/data/shard-*.tar"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [shard["url"] for shard in info["shards"]] == wds.expand_urls(DATA)
    assert [shard["samples"] for shard in info["shards"]] == [8] * SHARDS
    assert main(["ls", f"az://{CONTAINER}/data/nothing-*.tar"]) != 0
    assert "names no shard" in capsys.readouterr().err


def test_cached_az_dataset_downloads_once_and_works_when_the_server_is_gone(az_settings, monkeypatch, tmp_path,
                                                                             az_expected):
    assert strip(wds.WebDataset(DATA, shardshuffle=False, cache_dir=str(tmp_path))) == az_expected
    cached = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert len(cached) == SHARDS
    dead = az_settings.connection_string(endpoint=f"http://127.0.0.1:{free_port()}/devstoreaccount1")
    monkeypatch.setenv("SHARDSTREAM_STORAGE", storage_yaml("az://", dead))
    assert strip(wds.WebDataset(DATA, shardshuffle=False, cache_dir=str(tmp_path))) == az_expected
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == cached


def test_len_from_sidecar_indexes_next_to_the_shards(az_settings, az_local, tmp_path):
    from shardstream.indexed import index_dataset

    fs = az_settings.filesystem()
    index_dataset(az_local, str(tmp_path / "index.json"), progress=False)  # writes the sidecars next to them
    for i, path in enumerate(az_local[:2]):
        fs.put_file(path + ".ssidx", f"{CONTAINER}/data/shard-{i:06d}.tar.ssidx")
    indexed = f"az://{CONTAINER}/data/shard-{{000000..000001}}.tar"
    assert len(wds.WebDataset(indexed)) == 16 == len(list(wds.WebDataset(indexed)))
    with pytest.raises(TypeError, match="shard-000002.tar' are not known: it has no sidecar index"):
        len(wds.WebDataset(DATA))


def test_indexed_dataset_reads_az_shards_through_a_registered_source(az_settings, az_local, tmp_path,
                                                                     monkeypatch):
    """Random access has no built-in az:// source: a ConfigError names the URL and the fix, and a source
    registered by the user (here: each file downloaded once by the shard cache, then memory-mapped) serves it."""
    from shardstream.indexed import IndexedDataset, LocalSource, index_shard, register_source, source
    from shardstream.io.cache import ShardCache

    fs = az_settings.filesystem()
    index_shard(az_local[0])
    fs.put_file(az_local[0] + ".ssidx", f"{CONTAINER}/indexed/shard-000000.tar.ssidx")
    fs.put_file(az_local[0], f"{CONTAINER}/indexed/shard-000000.tar")
    url = f"az://{CONTAINER}/indexed/shard-000000.tar"
    with pytest.raises(ConfigError, match=r"no byte source for az:// URLs.*register_source"):
        IndexedDataset(url)
    cache = ShardCache(str(tmp_path / "cache"))
    monkeypatch.setattr(source, "_FACTORIES", dict(source._FACTORIES))  # registered for this test only
    register_source("az", lambda u: LocalSource(cache.fetch(u), u))
    dataset = IndexedDataset(url)
    local = IndexedDataset(az_local[0])
    assert len(dataset) == len(local) == 8
    assert [strip([dataset[i]]) for i in (7, 0, 3)] == [strip([local[i]]) for i in (7, 0, 3)]


def test_spec_gives_its_container_its_own_settings(az_data, monkeypatch, az_expected):
    from shardstream.io.storage_config import load_storage_config
    from shardstream.spec import load_spec

    monkeypatch.delenv("SHARDSTREAM_STORAGE", raising=False)
    spec = load_spec({"storage": [{"prefix": f"az://{CONTAINER}/",
                                   "options": {"connection_string": az_data.connection_string()}}],
                      "sources": [{"name": "az", "shards": DATA, "samples": len(az_expected)}]})
    dataset = wds.WebDataset(spec, shardshuffle=False)
    assert strip(dataset) == az_expected
    del dataset, spec
    gc.collect()
    assert load_storage_config().match(wds.expand_urls(DATA)[0]) is None  # the spec's rules went with it


# -- errors ------------------------------------------------------------------------------------------------------

@pytest.fixture
def logged(caplog):
    caplog.set_level(logging.DEBUG, logger="shardstream")
    return caplog


def shown(error: BaseException, caplog) -> str:
    """Everything a user may see of an error: its text, its notes, its causes, and the log records."""
    texts, seen = [], error
    while seen is not None:
        texts += [str(seen), *getattr(seen, "__notes__", [])]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(texts + [r.getMessage() for r in caplog.records])


def test_a_missing_blob_is_an_open_error_naming_the_url(az_settings, logged):
    with pytest.raises(OpenError, match="data/nope.tar") as e:
        open_url(f"az://{CONTAINER}/data/nope.tar")
    assert ACCOUNT_KEY not in shown(e.value, logged) and "AccountKey=" not in shown(e.value, logged)


def test_a_missing_container_is_an_open_error_naming_the_url(az_settings, logged):
    with pytest.raises(OpenError, match="az://no-such-container/shard.tar") as e:
        list(wds.WebDataset("az://no-such-container/shard.tar", shardshuffle=False))
    assert ACCOUNT_KEY not in shown(e.value, logged)


def test_a_wrong_account_key_is_refused_without_showing_any_key(az_data, monkeypatch, logged):
    wrong = "QUFB" * 21 + "QQ=="  # a well-formed key of the same length that is not the account's
    monkeypatch.setenv("SHARDSTREAM_STORAGE", storage_yaml("az://", az_data.connection_string(key=wrong)))
    with pytest.raises(OpenError, match=f"az://{CONTAINER}/data/shard-000000.tar") as e:
        list(wds.WebDataset(DATA, shardshuffle=False))
    text = shown(e.value, logged)
    assert "AuthorizationFailure" in text or "authenticate" in text
    assert wrong not in text and ACCOUNT_KEY not in text


def test_no_credentials_is_a_config_error_naming_the_url_and_the_fix(az_data, monkeypatch):
    monkeypatch.delenv("SHARDSTREAM_STORAGE", raising=False)
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=r"az://shards/data/shard-000000.tar.*connection_string"):
        open_url(f"az://{CONTAINER}/data/shard-000000.tar")


def test_a_read_only_sas_reads_and_a_denied_write_is_a_write_error_without_the_signature(az_data, monkeypatch,
                                                                                        az_expected, logged):
    from datetime import datetime, timedelta, timezone

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    sas = generate_container_sas(ACCOUNT, CONTAINER, account_key=ACCOUNT_KEY,
                                 permission=ContainerSasPermissions(read=True, list=True),
                                 expiry=datetime.now(timezone.utc) + timedelta(hours=1))
    signature = dict(part.split("=", 1) for part in sas.split("&"))["sig"]
    reader = f"BlobEndpoint={az_data.endpoint};SharedAccessSignature={sas}"
    monkeypatch.setenv("SHARDSTREAM_STORAGE", storage_yaml("az://", reader))
    assert samples_of(wds.expand_urls(DATA)) == az_expected
    sink = wds.TarWriter(f"az://{CONTAINER}/denied/a.tar")
    sink.write({"__key__": "a", "txt": "x"})
    with pytest.raises(WriteError, match=f"az://{CONTAINER}/denied/a.tar") as e:
        sink.close()
    text = shown(e.value, logged)
    assert "AuthorizationPermissionMismatch" in text or "not authorized" in text
    assert signature not in text and sas not in text


def test_azure_rules_give_adlfs_the_account_and_refuse_settings_it_would_ignore():
    rule = StorageRule.from_dict({"prefix": "az://c/", "key": "account", "secret": "account-key-value",
                                  "token": "sv=2024&sig=abc"})
    assert rule.fsspec_options("az") == {"account_name": "account", "account_key": "account-key-value",
                                         "sas_token": "sv=2024&sig=abc"}
    assert StorageRule.from_dict({"bucket": "c", "scheme": "abfs", "anon": True}).fsspec_options("abfs") == {
        "anon": True}
    with pytest.raises(ConfigError, match=r"\['endpoint_url'\] of abfss://c/ have no meaning for Azure.*"
                                          "connection_string"):
        StorageRule.from_dict({"prefix": "abfss://c/", "endpoint_url": "http://127.0.0.1:10000/devstoreaccount1"})


# -- a dropped connection ----------------------------------------------------------------------------------------

def test_reads_resume_through_a_proxy_that_cuts_connections(az_data, monkeypatch, az_expected):
    # seed 5: the first three connections are cut mid-answer, the next ones pass (the client keeps them alive);
    # each cut also costs the Azure SDK's own retry pause (about a second)
    proxy = FaultProxy(az_data.port, seed=5, weights={"pass": 1, "cut": 1}, cut_range=(500, 100_000))
    through = az_data.connection_string(endpoint=proxy.url("devstoreaccount1"))
    monkeypatch.setenv("SHARDSTREAM_STORAGE", storage_yaml("az://", through))
    monkeypatch.setenv("SHARDSTREAM_BLOCK_SIZE", "128K")
    monkeypatch.setenv("SHARDSTREAM_HTTP_BACKOFF", "0.001")
    monkeypatch.setenv("SHARDSTREAM_HTTP_RETRIES", "8")
    try:
        assert samples_of(wds.expand_urls(DATA)) == az_expected
    finally:
        proxy.stop()
    assert proxy.faults >= 3, proxy.counts
