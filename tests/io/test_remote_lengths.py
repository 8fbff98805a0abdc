"""len(WebDataset) over HTTP shards (real nginx): the sidecar index is fetched (its header only) through the
opener of the shard's scheme when it exists next to the shard; without it there is no length (a TypeError), and
no shard is read to count."""

from __future__ import annotations

import pytest
from remote_servers import Nginx, missing

import shardstream as wds
from shardstream.indexed import index_dataset
from shardstream.testing import write_shards


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    reason = missing("nginx")
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("lengths")
    index_dataset(write_shards(root / "indexed", [5, 3]), root / "indexed.json")
    write_shards(root / "plain", [5, 3])
    server = Nginx(str(root), str(tmp_path_factory.mktemp("nginx-lengths")))
    yield server
    server.stop()


def test_len_of_http_shards_from_their_sidecars(served):
    urls = served.url("indexed/shard-{000000..000001}.tar")
    assert len(wds.WebDataset(urls)) == 8 == len(list(wds.WebDataset(urls)))


def test_http_shards_without_sidecars_have_no_length(served):
    with pytest.raises(TypeError, match="shard-000000.tar' are not known: it has no sidecar index"):
        len(wds.WebDataset(served.url("plain/shard-{000000..000001}.tar")))
