"""The viewer on remote shards served by nginx: with an index beside them, only the index and the bytes of the
fields shown cross the network (ranged reads); nothing is downloaded into the cache."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tracemalloc

import numpy as np
import pytest
import shapes
from viewer_helpers import get, get_json, running

from shardstream.errors import OpenError
from shardstream.indexed import index_shard
from shardstream.testing import write_shards
from shardstream.viewer.remote import RangeSource

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "io"))
from fault_servers import StubHTTP  # noqa: E402
from remote_servers import Nginx, missing  # noqa: E402

pytestmark = pytest.mark.skipif(missing("nginx") is not None, reason=str(missing("nginx")))


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    for name in shapes.build_shapes(root):
        index_shard(str(root / name))  # the sidecar NAME.tar.ssidx next to the shard
    shutil.copy(root / "shapes-000001.tar", root / "unindexed.tar")
    rng = np.random.default_rng(0)
    fields = {"bin": lambda shard, index, i: rng.bytes(200_000), "cls": lambda shard, index, i: i % 3}
    write_shards(root, [40], fields, name="big.tar", key="big{number:03d}", index=True)  # 40 samples of 200 KB: 8 MB
    server = Nginx(str(root), str(tmp_path_factory.mktemp("nginx")))
    yield root, server
    server.stop()


def test_indexed_remote_shards_are_read_in_place(nginx, tmp_path):
    root, server = nginx
    cache = tmp_path / "cache"
    with running([server.url("shapes-{000000..000001}.tar")], cache_dir=str(cache)) as viewer:
        info = get_json(viewer, "/api/info")
        assert info["samples"] == shapes.SAMPLES and info["classes"] == shapes.CLASSES
        sample = get_json(viewer, "/api/sample/13")
        assert sample["key"] == "shape0013" and sample["overlay"]["boxes"][0]["label"] == "disc"
        status, _, body = get(viewer, "/api/field/13/png")
        assert status == 200 and body == shapes.sample(13)["png"]
        page = get_json(viewer, "/api/samples?limit=4")
        assert [i["key"] for i in page["items"]] == [f"shape{i:04d}" for i in range(4)]
        assert all(i["problems"] == [] for i in page["items"])  # no scan of a remote dataset for a page
        assert get_json(viewer, "/api/stats")["broken"] == len(shapes.BROKEN)  # the scan, when asked for
    assert not cache.exists() or not [n for n in os.listdir(cache) if n.endswith(".tar")]


def test_only_the_fields_shown_cross_the_network(nginx, tmp_path):
    root, server = nginx
    with running([server.url("big.tar")], cache_dir=str(tmp_path / "cache")) as viewer:
        assert get_json(viewer, "/api/info")["samples"] == 40
        assert [i["label"] for i in get_json(viewer, "/api/samples?limit=6")["items"]] == [0, 1, 2, 0, 1, 2]
        status, _, body = get(viewer, "/api/field/17/bin")
        assert status == 200 and len(body) == 200_000
        (source,) = viewer.data._sources.values()
        size = os.path.getsize(root / "big.tar")
        assert source.fetched < size / 10, (source.fetched, size)  # the labels of 6 samples and one field


def test_a_remote_shard_without_index_is_downloaded(nginx, tmp_path):
    root, server = nginx
    cache = tmp_path / "cache"
    with running([server.url("unindexed.tar")], cache_dir=str(cache)) as viewer:
        assert get_json(viewer, "/api/sample/0")["key"] == "shape0012"
    assert len([n for n in os.listdir(cache) if n.endswith(".tar")]) == 1


def test_a_server_ignoring_range_is_not_downloaded_by_the_probe():
    """The one-byte probe of a 32 MiB shard answered 200 (the whole body) reads none of that body: an OpenError
    that says why (and shows no password), with the memory of a probe."""
    stub = StubHTTP({"big.tar": bytes(32 << 20)}, ranges=False)
    tracemalloc.start()
    try:
        with pytest.raises(OpenError, match="answered 200 to a range request") as caught:
            RangeSource(stub.url("big.tar").replace("//", "//user:secret@"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        stub.stop()
    assert peak < 1 << 20, f"{peak / 2**20:.1f} MiB read by a one-byte probe"
    assert "secret" not in str(caught.value) and "user:***@" in str(caught.value)


@pytest.mark.parametrize("location", ["file:///etc/passwd", "pipe:touch pwned", "http://[::1/a.tar",
                                      "http://127.0.0.1:port/a.tar"])
def test_the_probe_follows_redirects_to_http_only(location):
    """A redirect to another scheme or a malformed URL is an OpenError, and no connection is made for it."""
    import http.server
    import threading

    seen = []

    class Redirect(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(OpenError, match="redirected"):
            RangeSource(f"http://127.0.0.1:{server.server_address[1]}/a.tar")
        assert seen == ["/a.tar"]
    finally:
        server.shutdown()
        server.server_close()
