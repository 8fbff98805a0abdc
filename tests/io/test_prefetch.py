"""The next shard opened ahead (io/prefetch.py): exactly the one the pipeline's reader opens next, whatever the
names and the order (shuffled, resampled), through the plain reading loop and the checkpointed cursor; nothing
opened ahead at the end of a list, and the shard opened ahead closed when iteration stops early."""

from __future__ import annotations

import gc
import hashlib
import random
import time

import pytest
from fault_servers import StubHTTP
from remote_servers import build_shard

from shardstream import WebDataset
from shardstream.io import open_url, prefetch
from shardstream.pipeline import tarfile_samples

NAMES = ["zebra.tar", "apple.tar", "quux/mango.tar", "kiwi-2024.tar", "b.tar", "shard-000007.tar"]


@pytest.fixture
def one_part(monkeypatch, fast_retries):
    """Parts bigger than the test shards: a shard is planned at once, so the next one is opened ahead at once."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", "8M")
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    root = tmp_path_factory.mktemp("named")
    files = {}
    for i, name in enumerate(NAMES):
        path = root / f"{i}.tar"
        build_shard(str(path), i, count=4)
        files[name] = path.read_bytes()
    server = StubHTTP(files)
    yield server
    server.stop()


@pytest.fixture
def requests(stub):
    """The module's stub with its request log cleared once the previous test's parts are all sent: a part planned
    on the previous shard's size, past the end of a smaller shard, may still go out (and get a 416) after its
    shard was read. Whatever an earlier test's reader had opened ahead is dropped first (``prefetch.forget``):
    a stream opened ahead is handed to a later reader of its URL, which then sends no request of its own."""
    prefetch.forget()
    deadline, seen = time.monotonic() + 5, -1
    while len(stub.requests) != seen and time.monotonic() < deadline:
        seen = len(stub.requests)
        time.sleep(0.2)
    stub.requests.clear()
    return stub


def _paths(stub) -> list[str]:
    return [path for path, _ in stub.requests]


def _opens(stub) -> list[str]:
    """The shards opened, in order: their first requests (a shard over 1 MiB is read in several parts)."""
    return [path for path, rng in stub.requests if rng is None or rng.startswith("bytes=0-")]


def _wait_for(stub, path: str) -> None:
    """Until ``path`` is opened (ahead, in the background): until its first request has arrived. Not just any
    request naming it: the parts after the first of a shard opened ahead are planned on the previous shard's size
    (``ranged._LAST_SIZE``) and can reach the server before the first part's request."""
    deadline = time.monotonic() + 10
    while path not in _opens(stub) and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("reader", ["loop", "cursor"])
def test_the_shard_opened_ahead_is_the_next_of_a_shuffled_list(requests, one_part, seed, reader):
    order = random.Random(seed).sample(NAMES, len(NAMES))
    urls = [requests.url(name) for name in order]
    it = iter(tarfile_samples(urls) if reader == "loop" else WebDataset(urls, shardshuffle=False))
    first = next(it)
    assert first["__url__"] == urls[0]
    _wait_for(requests, order[1])
    assert set(_opens(requests)) == {order[0], order[1]}, requests.requests  # the exact next shard, and no other
    rest = [s["__url__"] for s in it]
    assert sorted(set(rest), key=urls.index) == urls
    for name in order:  # each shard opened once: the reader got the stream opened ahead
        assert requests.full_gets(name) == 1, name
    assert len(requests.requests) == len(set(requests.requests))  # and each part of it once


def test_a_resampled_shard_list_opens_each_draw_once(requests, one_part):
    order = ["b.tar", "b.tar", "apple.tar", "b.tar", "zebra.tar"]  # drawn with replacement
    samples = list(tarfile_samples([requests.url(name) for name in order]))
    assert len(samples) == 4 * len(order)
    assert _opens(requests) == order  # in order, one open per draw, nothing else


def test_nothing_is_opened_ahead_after_the_last_shard_of_a_list(requests, one_part):
    order = ["shard-000007.tar", "b.tar"]
    list(tarfile_samples([requests.url(name) for name in order]))
    time.sleep(0.3)  # what a guess would have had time to ask for
    assert _opens(requests) == order
    assert not prefetch._AHEAD


@pytest.mark.parametrize("reader", ["loop", "cursor"])
def test_the_shard_opened_ahead_is_closed_when_iteration_stops(requests, one_part, reader):
    urls = [requests.url(name) for name in ("apple.tar", "zebra.tar", "b.tar")]
    it = iter(tarfile_samples(urls) if reader == "loop" else WebDataset(urls, shardshuffle=False))
    next(it)
    _wait_for(requests, "zebra.tar")
    ahead = [future.result(timeout=10) for future, _ in prefetch._AHEAD.values()]
    assert [stream.url for stream in ahead] == [urls[1]]
    if reader == "loop":
        it.close()
    del it  # a cursor dropped mid-shard
    gc.collect()
    assert not prefetch._AHEAD and ahead[0].closed
    assert "b.tar" not in _opens(requests)


def test_a_bare_open_of_a_numbered_series_still_guesses(requests, one_part):
    with open_url(requests.url("shard-000007.tar")) as f:
        f.read()
    _wait_for(requests, "shard-000008.tar")  # the guess (a 404 here, dropped silently)
    assert "shard-000008.tar" in _paths(requests)


def _read_in_child(url: str) -> str:
    with open_url(url) as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_a_forked_worker_opens_its_own_connections(requests, monkeypatch, fast_retries, forked):
    """A DataLoader worker forked after the parent read from a server never uses the parent's kept-alive
    connections (two processes on one socket would mix their answers): the server sees new connections."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", "64K")  # parts whose connections go back to the pool
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    accepted = []
    get_request = requests.server.get_request

    def counting():
        found = get_request()
        accepted.append(found[1])
        return found

    requests.server.get_request = counting
    url = requests.url("zebra.tar")
    try:
        with open_url(url) as f:
            want = hashlib.sha256(f.read()).hexdigest()
        time.sleep(0.3)  # the part's thread gives its kept-alive connection back to the pool
        before = len(accepted)
        assert forked(_read_in_child, url) == want
        assert len(accepted) > before  # the child connected on its own
        with open_url(url) as f:  # and the parent's connections still serve the parent
            assert hashlib.sha256(f.read()).hexdigest() == want
    finally:
        requests.server.get_request = get_request


def test_a_number_in_the_host_or_port_is_no_shard_number():
    """``http://127.0.0.1:8080/good.tar`` was guessed to be followed by port 8081: a refused connection retried
    for ~12 s in the background, which held up the program's exit."""
    from shardstream.io.prefetch import _shifted, next_in_series

    assert _shifted("http://127.0.0.1:8080/good.tar", 1) is None
    assert _shifted("http://10.0.0.7/data/train.tar", 1) is None
    assert _shifted("http://127.0.0.1:8080/s-0001.tar", 1) == "http://127.0.0.1:8080/s-0002.tar"
    assert next_in_series("http://h:8080/a.tar", "http://h:8081/a.tar") is None
    assert next_in_series("s3://b/s-0001.tar", "s3://b/s-0002.tar") == "s3://b/s-0003.tar"
    assert _shifted("shards/s-0007.tar", 2) == "shards/s-0009.tar"


def test_a_lookahead_closed_by_the_collector_inside_a_locked_region_goes_on(monkeypatch):
    """A reader's generator dropped earlier is finalized by the garbage collector wherever this thread allocates,
    also inside the prefetcher's locked regions (starting the opener thread of the next shard), and its
    ``Lookahead.close()`` takes the lock again: that must not wait for itself (a stream shuffle over many small
    remote shards hung there, 0% CPU)."""
    import threading

    from shardstream.io import prefetch

    monkeypatch.setattr(prefetch, "_LOCK", type(prefetch._LOCK)())  # a failure blocks this lock only
    dying, done = prefetch.Lookahead(), threading.Event()

    def locked_region():
        with prefetch._LOCK:
            dying.close()  # what the finalizer of the dropped reader does when the collector runs here
        done.set()

    threading.Thread(target=locked_region, daemon=True).start()
    assert done.wait(30), "Lookahead.close() waited for the lock its own thread holds"
    assert dying.closed
