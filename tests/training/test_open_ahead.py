"""The stream shuffle opens the remote shards of a block ahead, several at once (shardstream.training.ahead).

One small HTTP server for the module: it serves 40 tiny shards (4 samples each) with ``Range``, counts the
requests in flight at once, and can hold every request at a gate until the test opens it. No timed assertion:
the gate opens on a count of requests in flight, or when the test says so.
"""

from __future__ import annotations

import gc
import http.server
import threading

import pytest
from training_data import keys_of, write_dataset

from shardstream.errors import ConfigError, OpenError
from shardstream.io import open_url, prefetch
from shardstream.order import StreamOrder
from shardstream.training import TrainingDataset
from shardstream.training.iterators import StreamReader

SHARDS, PER_SHARD = 40, 4
AHEAD = 4


class GatedServer:
    """Serves ``files`` on 127.0.0.1 (anything else: 404 at once); each request waits at the gate until ``want``
    requests are in flight at once (then the gate stays open) or :meth:`release` is called."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.cond = threading.Condition()
        self.in_flight = self.most = 0
        self.gets: dict[str, int] = {}
        self.want: int | None = None  # None: the gate is open
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # the headers and the body go out as two writes

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                server.serve(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def hold(self, want: int | None) -> None:
        """Hold requests until ``want`` are in flight at once (None: hold them until :meth:`release`)."""
        with self.cond:
            self.want, self.most, self.gets = (want if want is not None else 1 << 30), 0, {}

    def release(self) -> None:
        with self.cond:
            self.want = None
            self.cond.notify_all()

    def serve(self, h: http.server.BaseHTTPRequestHandler) -> None:
        name = h.path.lstrip("/")
        body = self.files.get(name)
        if body is None:  # at once, held or not
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        with self.cond:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            if h.headers.get("Range", "bytes=0-").startswith("bytes=0-"):  # a download: from the first byte on
                self.gets[name] = self.gets.get(name, 0) + 1  # (a later part planned past a tiny shard's end is none)
            if self.want is not None and self.in_flight >= self.want:
                self.want = None
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: self.want is None, timeout=20):  # a broken build: never opens
                self.want = None
                self.cond.notify_all()
            self.in_flight -= 1
        start, end = 0, len(body) - 1
        ranged = h.headers.get("Range", "").startswith("bytes=")
        if ranged:
            first, _, last = h.headers["Range"][6:].partition("-")
            start, end = int(first), min(int(last) if last else end, end)
        h.send_response(206 if ranged else 200)
        if ranged:
            h.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
        h.send_header("Content-Length", str(end - start + 1))
        h.end_headers()
        try:
            h.wfile.write(body[start : end + 1])
        except OSError:  # the client went away (a stream closed early)
            h.close_connection = True

    def stop(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    paths = write_dataset(tmp_path_factory.mktemp("ahead"), [PER_SHARD] * SHARDS)
    files = {f"t-{i:03d}.tar": open(path, "rb").read() for i, path in enumerate(paths)}
    srv = GatedServer(files)
    srv.paths = paths
    yield srv
    srv.stop()


def urls(server, missing: int | None = None) -> list[str]:
    return [server.url(f"t-{i:03d}.tar" if i != missing else "gone.tar") for i in range(SHARDS)]


def dataset(server, urls_, **kw) -> TrainingDataset:
    kw = {"batch_size": 8, "shuffle": "stream", "buffer": 64, "seed": 3, "rank": 0, "world_size": 1, **kw}
    return TrainingDataset(urls_, lengths=[PER_SHARD] * SHARDS, **kw)


def reference(server) -> list[int]:
    """The sample numbers of an epoch of the same shards read from local files, each opened when first read (the
    order depends on the shards' lengths only, not on their URLs)."""
    return keys_of(dataset(server, server.paths, open_ahead=0))


def opens_ahead() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("shardstream-open-ahead")]


def wait_ended(threads: list[threading.Thread]) -> list[threading.Thread]:
    for t in threads:
        t.join(60)  # a deadline for a broken build, not a measure
    return [t for t in threads if t.is_alive()]


def test_a_block_opens_its_shards_several_at_once_in_the_same_order(server):
    """Each block of 64 samples spans 16 tiny shards: they are requested AHEAD at once (the gate opens only when
    that many are in flight; never more), and the batches are those of the shards opened one by one."""
    server.hold(AHEAD)
    ahead = keys_of(dataset(server, urls(server), open_ahead=AHEAD))
    assert server.most == AHEAD
    assert ahead == reference(server) and sorted(ahead) == list(range(SHARDS * PER_SHARD))


def test_resumed_epoch_gives_exactly_the_remaining_batches(server):
    server.release()
    full = list(dataset(server, urls(server)))
    ds = dataset(server, urls(server))
    it = iter(ds)
    first = [next(it) for _ in range(5)]  # mid-block (8 samples a batch, 64 a block), mid-group
    state = ds.state_dict()
    del it
    again = dataset(server, urls(server))
    again.load_state_dict(state)
    assert keys_of(first) + keys_of(again) == keys_of(full)


def _first_error(ds) -> tuple[type, str]:
    """The type and message of what the first batch raises (no traceback kept: it would hold the reader)."""
    try:
        next(iter(ds))
    except Exception as e:  # noqa: BLE001 - compared by the caller
        return type(e), str(e)
    raise AssertionError("no error")


def test_a_shard_that_fails_ahead_raises_as_its_own_open_would(server):
    """The first shard the block reads is missing while the others opened ahead are held at the server: the error
    is the one the shard's own open raises, naming its URL; dropping the reader closes every stream opened ahead
    and its threads end once the server lets the held requests go."""
    order_first = int(dataset(server, urls(server)).order(0).group_shards(0)[0])
    broken = urls(server, missing=order_first)
    server.release()
    alone = _first_error(dataset(server, broken, open_ahead=0))
    prefetch.forget(wait=True)
    server.hold(None)
    ahead = _first_error(dataset(server, broken, open_ahead=AHEAD))
    assert ahead[0] is alone[0] and issubclass(ahead[0], OpenError)
    assert server.url("gone.tar") in ahead[1] and server.url("gone.tar") in alone[1]
    gc.collect()
    server.release()
    assert wait_ended(opens_ahead()) == []


def test_a_reader_dropped_mid_block_closes_what_it_opened_ahead(server):
    """A reader stopped while its shards are being opened ahead (held at the server), then dropped: every stream
    opened ahead is closed, and no thread is left once the server answers."""
    opened = []

    def opener(url):
        stream = open_url(url)
        opened.append(stream)
        return stream

    order = StreamOrder((PER_SHARD,) * SHARDS, seed=1, epoch=0, window=8, buffer=64)
    server.hold(None)
    reader = StreamReader(urls(server), order, opener=opener, open_ahead=AHEAD)
    reader._ahead.plan(range(16))  # what loading block 0 starts with; then the training loop breaks
    assert reader._ahead.in_flight == AHEAD
    threads = opens_ahead()
    del reader
    gc.collect()
    server.release()
    assert wait_ended(threads) == []
    assert len(opened) == AHEAD and all(stream.closed for stream in opened)


def test_the_shard_cache_downloads_each_shard_once_when_opened_ahead(server, tmp_path):
    server.hold(AHEAD)
    ds = dataset(server, urls(server), cache_dir=tmp_path / "cache", open_ahead=AHEAD)
    assert keys_of(ds) == reference(server) and server.most == AHEAD
    assert keys_of(ds) != reference(server)  # the next epoch, from the cache
    assert sorted(server.gets.values()) == [1] * SHARDS


def test_open_ahead_must_be_a_count():
    with pytest.raises(ConfigError, match="open_ahead"):
        TrainingDataset(["a.tar"], batch_size=1, shuffle="stream", lengths=[1], open_ahead=-1)
