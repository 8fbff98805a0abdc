"""s3:// against a real S3 service: Ceph RadosGW started by the session (tests skip only when Ceph is missing).

Reading (ranged blocks, read-ahead, retries through a fault proxy), two buckets on two services in one pipeline
(RadosGW + moto), writing with multipart uploads that appear only when complete, and the cache offline."""

from __future__ import annotations

import pytest
from fault_servers import FaultProxy
from remote_servers import (
    BUCKET,
    RGW_KEYS,
    boto3_client,
    free_port,
    s3_settings_yaml,
    samples_of,
    upload,
)

from shardstream.errors import OpenError, WriteError
from shardstream.io import open_url
from shardstream.io.objectstore import ObjectStream, filesystem_for

pytest.importorskip("s3fs", reason="s3fs is not installed: pip install 'shardstream[s3]'")


def strip(samples):
    return [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in samples]


def test_samples_from_radosgw_equal_the_local_ones(rgw_settings, expected):
    from shardstream.dataset import WebDataset

    ds = WebDataset(f"s3://{BUCKET}/data/shard-{{000000..000003}}.tar", shardshuffle=False)
    assert strip(ds) == expected


def test_small_blocks_and_read_ahead_are_exact(rgw_settings, local_shards):
    fs, path = filesystem_for(f"s3://{BUCKET}/data/shard-000001.tar")
    with ObjectStream("s3://x", fs, path, block_size=65_536, prefetch=3) as f, open(local_shards[1], "rb") as local:
        assert f.size == len(want := local.read()) and f.etag
        assert f.read(1000) + f.read(70_000) + f.read() == want


def test_missing_object_is_an_open_error(rgw_settings):
    with pytest.raises(OpenError, match="nope.tar"):
        open_url(f"s3://{BUCKET}/data/nope.tar")


@pytest.mark.parametrize("client", ["signed-url", "fsspec"])
def test_reads_survive_a_faulty_connection(rgw, monkeypatch, expected, fast_retries, client):
    """Both read paths: the native client on a presigned URL, and s3fs (chosen by TLS options of its own)."""
    proxy = FaultProxy(rgw.port, seed=11, weights={"pass": 2, "cut": 4, "reset": 1, "503": 1},
                       cut_range=(500, 300_000))
    settings = s3_settings_yaml([(BUCKET, proxy.url().rstrip("/"), RGW_KEYS)])
    if client == "fsspec":
        settings = settings.rstrip() + "\n    options: {client_kwargs: {verify: false}}\n"
    monkeypatch.setenv("SHARDSTREAM_STORAGE", settings)
    monkeypatch.setenv("SHARDSTREAM_BLOCK_SIZE", "256K")
    try:
        assert samples_of([f"s3://{BUCKET}/data/shard-{i:06d}.tar" for i in range(4)]) == expected
    finally:
        proxy.stop()
    assert proxy.faults >= 3, proxy.counts


def test_two_buckets_on_two_services_in_one_pipeline(rgw, moto_s3, monkeypatch, local_shards, expected):
    from shardstream.dataset import WebDataset

    moto_keys = ("moto-key", "moto-secret")
    upload(moto_s3, moto_keys, "elsewhere", {f"shard-{i:06d}.tar": local_shards[i] for i in (2, 3)})
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([(BUCKET, rgw.endpoint, RGW_KEYS),
                                                                ("elsewhere", moto_s3, moto_keys)]))
    urls = [f"s3://{BUCKET}/data/shard-00000{i}.tar" for i in (0, 1)] + [f"s3://elsewhere/shard-00000{i}.tar"
                                                                          for i in (2, 3)]
    assert strip(WebDataset(urls, shardshuffle=False)) == expected


def test_shardwriter_uploads_multipart_shards(rgw_settings, monkeypatch, local_shards):
    from shardstream.writer import ShardWriter

    monkeypatch.setenv("SHARDSTREAM_BLOCK_SIZE", "5M")
    written = [{"__key__": f"k{i:04d}", "bin": bytes([i % 256]) * 700_000, "cls": i} for i in range(24)]
    with ShardWriter(f"s3://{BUCKET}/out/part-%06d.tar", maxsize=12e6) as sink:
        for sample in written:
            sink.write(sample)
    assert sink.shards == [f"s3://{BUCKET}/out/part-00000{i}.tar" for i in range(2)]
    heads = [boto3_client(rgw_settings.endpoint).head_object(Bucket=BUCKET, Key=f"out/part-00000{i}.tar")
             for i in range(2)]
    assert heads[0]["ETag"].strip('"').endswith("-3")  # 11 MB: a multipart upload of three parts
    got = samples_of(sink.shards)
    assert [s["__key__"] for s in got] == [s["__key__"] for s in written]
    assert all(g["bin"] == w["bin"] and int(g["cls"]) == w["cls"] for g, w in zip(got, written))


def test_failed_write_publishes_nothing_and_aborts_the_upload(rgw_settings, monkeypatch):
    from shardstream.writer import TarWriter

    monkeypatch.setenv("SHARDSTREAM_BLOCK_SIZE", "5M")
    client = boto3_client(rgw_settings.endpoint)
    with pytest.raises(RuntimeError, match="boom"):
        with TarWriter(f"s3://{BUCKET}/failed/a.tar") as sink:
            for i in range(12):  # 8.4 MB: the first part is uploaded before the failure
                sink.write({"__key__": f"k{i}", "bin": b"x" * 700_000})
            raise RuntimeError("boom")
    assert client.list_objects_v2(Bucket=BUCKET, Prefix="failed/").get("KeyCount", 0) == 0
    assert not client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")


def test_a_write_error_on_close_is_a_write_error(rgw_settings, monkeypatch):
    from shardstream.writer import TarWriter

    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([(BUCKET, rgw_settings.endpoint,
                                                                 ("AKTEST", "wrong-secret"))]))
    sink = TarWriter(f"s3://{BUCKET}/denied/a.tar")
    sink.write({"__key__": "a", "txt": "x"})
    with pytest.raises(WriteError, match="denied/a.tar"):
        sink.close()


def test_cached_s3_dataset_works_when_the_service_is_gone(rgw_settings, monkeypatch, tmp_path, expected):
    from shardstream.dataset import WebDataset

    urls = f"s3://{BUCKET}/data/shard-{{000000..000003}}.tar"
    assert strip(WebDataset(urls, shardshuffle=False, cache_dir=str(tmp_path))) == expected
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([(BUCKET, dead, RGW_KEYS)]))
    assert strip(WebDataset(urls, shardshuffle=False, cache_dir=str(tmp_path))) == expected
