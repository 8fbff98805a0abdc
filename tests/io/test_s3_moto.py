"""The fast S3 layer: moto servers on loopback (mocks, never the only S3 tested: see test_s3_radosgw.py)."""

from __future__ import annotations

import pytest
from remote_servers import boto3_client, s3_settings_yaml, samples_of, upload

from shardstream.errors import OpenError
from shardstream.io import open_url

pytest.importorskip("s3fs", reason="s3fs is not installed: pip install 'shardstream[s3]'")

KEYS = ("moto-key", "moto-secret")


@pytest.fixture(scope="session")
def second_moto():
    """A second, independent moto server: another S3 service."""
    pytest.importorskip("moto.server")
    from remote_servers import moto_server

    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def moto_bucket(moto_s3, local_shards, monkeypatch):
    upload(moto_s3, KEYS, "fast", {f"d/shard-{i:06d}.tar": p for i, p in enumerate(local_shards)})
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([("fast", moto_s3, KEYS)]))
    return moto_s3


def test_read_from_moto(moto_bucket, expected, monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_BLOCK_SIZE", "100K")  # many ranged reads per shard
    assert samples_of([f"s3://fast/d/shard-{i:06d}.tar" for i in range(4)]) == expected


def test_two_services_chosen_by_bucket(moto_s3, second_moto, local_shards, expected, monkeypatch):
    upload(moto_s3, KEYS, "one", {"a.tar": local_shards[0], "b.tar": local_shards[1]})
    upload(second_moto, ("other", "keys"), "two", {"c.tar": local_shards[2], "d.tar": local_shards[3]})
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([("one", moto_s3, KEYS),
                                                                ("two", second_moto, ("other", "keys"))]))
    urls = ["s3://one/a.tar", "s3://one/b.tar", "s3://two/c.tar", "s3://two/d.tar"]
    assert samples_of(urls) == expected
    with pytest.raises(OpenError):  # "two" lives only on the second service
        open_url("s3://one/c.tar")


def test_tarwriter_publishes_on_close_only(moto_bucket):
    from shardstream.writer import TarWriter

    client = boto3_client(moto_bucket, KEYS)
    sink = TarWriter("s3://fast/w/one.tar")
    sink.write({"__key__": "a", "txt": "hello"})
    assert client.list_objects_v2(Bucket="fast", Prefix="w/").get("KeyCount", 0) == 0
    sink.close()
    assert [s["txt"] for s in samples_of(["s3://fast/w/one.tar"])] == [b"hello"]


def test_abandoned_writer_is_never_published(moto_bucket):
    import gc

    from shardstream.writer import TarWriter

    sink = TarWriter("s3://fast/w/dropped.tar")
    sink.write({"__key__": "a", "txt": "hello"})
    del sink
    gc.collect()
    client = boto3_client(moto_bucket, KEYS)
    assert client.list_objects_v2(Bucket="fast", Prefix="w/dropped").get("KeyCount", 0) == 0


def test_compressed_shards_round_trip(moto_bucket):
    from shardstream.writer import ShardWriter

    with ShardWriter("s3://fast/z/part-%03d.tar.gz", maxcount=3) as sink:
        for i in range(7):
            sink.write({"__key__": f"k{i}", "txt": f"text {i}"})
    assert sink.shards == [f"s3://fast/z/part-00{i}.tar.gz" for i in range(3)]
    with open_url(sink.shards[0]) as f:
        assert f.read(2) == b"\x1f\x8b"
    assert [s["txt"] for s in samples_of(sink.shards)] == [f"text {i}".encode() for i in range(7)]


def test_object_replaced_mid_read_is_an_error(moto_bucket, local_shards):
    from shardstream.io.objectstore import ObjectStream, filesystem_for

    client = boto3_client(moto_bucket, KEYS)
    client.upload_file(local_shards[0], "fast", "changing.tar")
    fs, path = filesystem_for("s3://fast/changing.tar")
    stream = ObjectStream("s3://fast/changing.tar", fs, path, block_size=65_536, prefetch=1)
    stream.read(1000)
    client.upload_file(local_shards[1], "fast", "changing.tar")  # replaced while being read
    stream._s3._drop()  # the connection breaks: the next block needs a new request, pinned to the old ETag
    with pytest.raises(OpenError, match="changed while it was being read"):
        stream.read()
    stream.close()


def test_s3_reads_use_a_signed_url_or_the_fsspec_client(moto_bucket, monkeypatch, expected):
    """By default a presigned URL streamed by the native HTTP client; with TLS settings of its own, s3fs reads."""
    from shardstream.io.objectstore import ObjectStream
    from shardstream.io.ranged import RangedStream

    urls = [f"s3://fast/d/shard-{i:06d}.tar" for i in range(4)]
    with open_url(urls[0]) as f:
        assert isinstance(f, RangedStream) and f.name == urls[0] and "Signature" not in repr(f)
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([("fast", moto_bucket, KEYS)]).rstrip()
                       + "\n    options: {client_kwargs: {verify: false}}\n")
    monkeypatch.setenv("SHARDSTREAM_BLOCK_SIZE", "200K")
    with open_url(urls[0]) as f:
        assert isinstance(f, ObjectStream)
    assert samples_of(urls) == expected
