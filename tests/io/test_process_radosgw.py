"""shardstream.process writing to s3:// on the real RadosGW: shards, DALI indexes and task manifests are
uploaded all or nothing; the result reads back equal to a local run; a rerun skips the complete tasks."""

from __future__ import annotations

import pytest
from remote_servers import RGW_KEYS, boto3_client, s3_settings_yaml, samples_of

from shardstream.process import map_dataset

pytest.importorskip("s3fs", reason="s3fs is not installed: pip install 'shardstream[s3]'")


def tag(sample):
    return {**sample, "tag.txt": "processed " + sample["__key__"]}


def test_process_to_radosgw_equals_a_local_run(rgw, local_shards, tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_STORAGE", s3_settings_yaml([("processed", rgw.endpoint, RGW_KEYS)]))
    client = boto3_client(rgw.endpoint, RGW_KEYS)
    try:
        client.create_bucket(Bucket="processed")
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    remote = map_dataset(local_shards, "s3://processed/run", tag, engine="local", workers=2, maxcount=7)
    local = map_dataset(local_shards, str(tmp_path / "run"), tag, engine="inline", maxcount=7)
    assert remote.index is None and remote.samples == local.samples == 48
    assert [u.rsplit("/", 1)[1] for u in remote.urls] == [u.rsplit("/", 1)[1] for u in local.urls]
    assert samples_of(remote.urls) == samples_of(local.urls)
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="processed", Prefix="run/")["Contents"]}
    assert {"run/part-000000-000.tar", "run/part-000000-000.idx", "run/_tasks/part-000003.json"} <= keys
    assert not any(k.endswith(".tmp") for k in keys)
    body = client.get_object(Bucket="processed", Key="run/part-000000-001.tar")["Body"].read()
    with open(local.urls[1], "rb") as f:
        assert body == f.read()  # byte-identical shards
    again = map_dataset(local_shards, "s3://processed/run", tag, engine="local", workers=2, maxcount=7)
    assert again.reused == 4 and again.urls == remote.urls
