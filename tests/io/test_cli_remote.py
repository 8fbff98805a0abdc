"""The command line on remote datasets: every reading command takes http:// and s3:// URLs (real servers)."""

from __future__ import annotations

import json
import os
import tarfile

import pytest
from remote_servers import BUCKET, SHARDS

from shardstream.cli import main

pytest.importorskip("s3fs", reason="s3fs is not installed: pip install 'shardstream[s3]'")


@pytest.fixture(params=["http", "s3"])
def remote_urls(request):
    """The four shards as http:// URLs on nginx and s3:// URLs on RadosGW."""
    if request.param == "http":
        nginx = request.getfixturevalue("nginx")
        return [nginx.url(f"data/shard-{i:06d}.tar") for i in range(SHARDS)]
    request.getfixturevalue("rgw_settings")
    return [f"s3://{BUCKET}/data/shard-{i:06d}.tar" for i in range(SHARDS)]


def keys_of(paths):
    keys = []
    for path in paths:
        with tarfile.open(path) as tf:
            keys += sorted({m.name.split(".", 1)[0] for m in tf.getmembers()})
    return keys


def test_info_verify_ls_on_remote_shards(remote_urls, local_shards, capsys):
    assert main(["info", "--json", *remote_urls]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert main(["info", "--json", *local_shards]) == 0
    local = json.loads(capsys.readouterr().out)
    assert remote["samples"] == local["samples"] > 0
    assert main(["verify", "--quiet", *remote_urls]) == 0
    assert main(["ls", remote_urls[0]]) == 0
    assert capsys.readouterr().out.strip()


def test_cat_split_shuffle_extract_from_remote_shards(remote_urls, local_shards, tmp_path):
    out = tmp_path / "all.tar"
    assert main(["cat", "--quiet", *remote_urls, "-o", str(out)]) == 0
    local = tmp_path / "local.tar"
    assert main(["cat", "--quiet", *local_shards, "-o", str(local)]) == 0
    assert out.read_bytes() == local.read_bytes()  # byte-identical to the same command on the local copies

    assert main(["split", "--quiet", *remote_urls, "-n", "2", "-o", str(tmp_path / "part-%02d.tar")]) == 0
    parts = sorted(str(p) for p in tmp_path.glob("part-*.tar"))
    assert len(parts) == 2 and sorted(keys_of(parts)) == sorted(keys_of([str(local)]))

    assert main(["shuffle", "--quiet", *remote_urls, "--seed", "3", "-o", str(tmp_path / "mixed.tar")]) == 0
    assert sorted(keys_of([str(tmp_path / "mixed.tar")])) == sorted(keys_of([str(local)]))

    assert main(["extract", "--quiet", remote_urls[0], "-C", str(tmp_path / "files")]) == 0
    assert len(os.listdir(tmp_path / "files")) > 0


def test_a_missing_remote_shard_is_a_clear_one_line_error(remote_urls, capsys):
    missing = remote_urls[0].replace("shard-000000", "no-such-shard")
    assert main(["info", missing]) == 3
    err = capsys.readouterr().err
    assert err.startswith("shardstream: error:") and "no-such-shard" in err and "Traceback" not in err
