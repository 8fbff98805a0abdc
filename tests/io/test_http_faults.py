"""Faults: cut connections at random offsets, resets, 500/503, stalls, servers without Range, short bodies,
objects changed mid-read. Whatever happens, a shard is either byte-identical to the local one or an OpenError."""

from __future__ import annotations

import pytest
from fault_servers import FaultProxy, StubHTTP
from remote_servers import samples_of

from shardstream.errors import OpenError
from shardstream.io import open_url
from shardstream.io.http import HttpStream


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_samples_through_a_faulty_proxy_equal_the_local_ones(nginx, expected, fast_retries, seed):
    weights = {"pass": 1, "cut": 6, "reset": 1, "500": 1, "503": 1, "stall": 0.5 if seed == 1 else 0}
    proxy = FaultProxy(nginx.port, seed=seed, weights=weights, stall=1.2, max_stalls=1)  # the timeout is 1 s
    try:
        got = samples_of([proxy.url(f"data/shard-{i:06d}.tar") for i in range(4)])
    finally:
        proxy.stop()
    assert got == expected
    # faults are drawn per connection, and a part read to its end leaves its connection to the next part
    assert proxy.counts.get("cut", 0) >= 2 and proxy.faults >= 4, proxy.counts


def test_every_kind_of_fault_is_survived(nginx, local_shards):
    """Each fault kind alone, on one stream: the bytes are exact and the stream did resume."""
    with open(local_shards[2], "rb") as f:
        want = f.read()
    for kind in ("cut", "reset", "500", "503", "stall"):
        proxy = FaultProxy(nginx.port, seed=7, weights={kind: 3, "cut": 1}, cut_range=(50_000, 150_000),
                           stall=0.6, max_stalls=2)
        try:
            stream = HttpStream(proxy.url("data/shard-000002.tar"), backoff=0.001, timeout=0.3, retries=6)
            assert stream.read() == want, kind
        finally:
            proxy.stop()
        assert proxy.counts.get(kind, 0) >= 1 and stream.requests > 1, (kind, proxy.counts)


def test_server_without_range_support_restarts_and_skips(local_shards):
    with open(local_shards[0], "rb") as f:
        want = f.read()
    stub = StubHTTP({"a.tar": want}, ranges=False)
    proxy = FaultProxy(stub.port, seed=3, weights={"cut": 2, "pass": 1}, cut_range=(len(want) // 2, len(want)))
    try:
        stream = HttpStream(proxy.url("a.tar"), backoff=0.001, retries=8)
        assert stream.read() == want and stream.resumes >= 1
        assert all(r is not None for _, r in stub.requests[1:])  # it asked for ranges, got everything again
    finally:
        proxy.stop()
        stub.stop()


def test_short_body_is_an_error_never_a_short_shard(local_shards):
    with open(local_shards[0], "rb") as f:
        data = f.read()
    stub = StubHTTP({"a.tar": data}, short=1000)
    sleeps: list[float] = []
    try:
        stream = HttpStream(stub.url("a.tar"), retries=3, backoff=0.01, sleep=sleeps.append)
        with pytest.raises(OpenError, match=r"ended after .* of %d bytes.*gave up after 3 retries" % len(data)):
            stream.read()
        assert stream.pos == len(data) - 1000 and len(sleeps) == 3
        assert sleeps == sorted(sleeps) or max(sleeps) <= 0.04  # exponential backoff, with jitter
    finally:
        stub.stop()


def test_short_body_fails_the_pipeline(local_shards, fast_retries):
    with open(local_shards[0], "rb") as f:
        stub = StubHTTP({"a.tar": f.read()}, short=700)
    try:
        with pytest.raises(OpenError):
            samples_of([stub.url("a.tar")])
    finally:
        stub.stop()


def test_object_changed_mid_read_is_an_error(local_shards):
    with open(local_shards[0], "rb") as f:
        data = f.read()
    stub = StubHTTP({"a.tar": data}, etag_changes=True)
    proxy = FaultProxy(stub.port, weights={"cut": 1}, cut_range=(100_000, 100_000))
    try:
        stream = HttpStream(proxy.url("a.tar"), backoff=0)
        with pytest.raises(OpenError, match="changed while it was being read"):
            stream.read()
    finally:
        proxy.stop()
        stub.stop()


def test_wrong_content_range_is_an_error(local_shards):
    with open(local_shards[0], "rb") as f:
        data = f.read()
    stub = StubHTTP({"a.tar": data}, bad_range_start=True)
    proxy = FaultProxy(stub.port, weights={"cut": 1}, cut_range=(50_000, 50_000))
    try:
        with pytest.raises(OpenError, match="asked for bytes from"):
            HttpStream(proxy.url("a.tar"), backoff=0).read()
    finally:
        proxy.stop()
        stub.stop()


def test_a_206_answer_without_content_range_is_retried(local_shards):
    """A header block cut by a dropped connection parses as an answer without Content-Range: it is retried like
    the cut it is, and a server that never sends one is an error naming the header after the retries."""
    with open(local_shards[0], "rb") as f:
        data = f.read()
    stub = StubHTTP({"a.tar": data}, no_content_range=2)
    try:
        assert HttpStream(stub.url("a.tar"), start=1000, backoff=0).read() == data[1000:]
        assert stub.requests == [("a.tar", "bytes=1000-")] * 3
        stub.flags["no_content_range"] = 100
        with pytest.raises(OpenError, match="without a valid Content-Range.*gave up after 2 retries"):
            HttpStream(stub.url("a.tar"), start=1000, retries=2, backoff=0)
    finally:
        stub.stop()


def test_persistent_503_gives_up_after_the_retries():
    stub = StubHTTP({}, status=503)
    sleeps: list[float] = []
    try:
        with pytest.raises(OpenError, match="HTTP 503.*gave up after 4 retries"):
            HttpStream(stub.url("a.tar"), retries=4, backoff=0.5, sleep=sleeps.append)
        assert len(stub.requests) == 5 and len(sleeps) == 4
        assert all(0.25 * 2**i <= s <= 0.5 * 2**i for i, s in enumerate(sleeps))  # 0.5 * 2**i with jitter
    finally:
        stub.stop()


def test_unreachable_server_is_an_open_error(fast_retries):
    from remote_servers import free_port

    with pytest.raises(OpenError, match="gave up after 6 retries"):
        open_url(f"http://127.0.0.1:{free_port()}/a.tar")
