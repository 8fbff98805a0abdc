"""Small remote shards keep a long link busy (io/ranged.py, io/prefetch.py): the first sample costs one request
(no size probe before the first byte: the first ranged GET's ``Content-Range`` gives the size), the next shard of
a list is requested while the current one is still arriving (the pipe does not drain at a shard boundary), and the
last bytes of a shard come in small parts over several connections rather than behind one big part.

Behaviour only, no timings: the server holds every byte past an offset until the test releases it, and the tests
look at the requests it has seen meanwhile."""

from __future__ import annotations

import http.client
import io
import tarfile
import threading
import time

import pytest
from fault_servers import StubHTTP
from link_emulator import LinkEmulator

from shardstream import WebDataset
from shardstream.io import open_url
from shardstream.io.fetchers import Fetchers
from shardstream.io.parts import LEAD, span


def _shard(count: int, size: int, seed: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(count):
            for ext, data in (("bin", bytes([(seed + i) % 251]) * size), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"s{seed}-{i:04d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _until(condition, what: str) -> None:
    """Poll ``condition`` (a hang guard, not a timing: the server holds its bytes until the test releases them)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def _iterate(urls: list[str]) -> tuple[list, threading.Event, list]:
    """Read every sample of ``urls`` in a thread; ``first`` is set once the first sample is out."""
    got: list = []
    errors: list = []
    first = threading.Event()

    def run() -> None:
        try:
            for sample in WebDataset(urls, shardshuffle=False):
                got.append(sample["__key__"])
                first.set()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
            first.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    got.append(thread)
    return got, first, errors


def test_the_first_sample_costs_one_request_and_no_size_probe(fast_retries):
    """The shard's first request is a ranged GET from byte 0, and the first sample comes out of its answer while
    the server holds every byte past that sample: no HEAD, no request whose answer it had to wait for first."""
    blob = _shard(20, 200_000, 0)
    stub = StubHTTP({"d/a.tar": blob}, hold_at=600_000)  # the first sample, and the next one's member
    try:
        got, first, errors = _iterate([stub.url("d/a.tar")])
        _until(first.is_set, "a first sample")
        seen = list(stub.requests)
        stub.release.set()
        got[0].join(60)
        assert not errors, errors
        assert got[1:3] == ["s0-0000", "s0-0001"] and len(got) == 21
        assert stub.heads == []
        # the first request: the first part, from byte 0 (the others are parts sent blind with it, held too)
        assert stub.full_gets("d/a.tar") == 1 and ("d/a.tar", f"bytes=0-{LEAD - 1}") in seen
    finally:
        stub.release.set()
        stub.stop()


def test_the_next_shard_is_requested_before_the_current_one_ends(fast_retries):
    """While the server holds the second half of the first shard, the reader has asked for the second shard
    already: the link has the next shard's bytes to carry when the first one ends."""
    a, b = _shard(10, 200_000, 1), _shard(10, 200_000, 2)
    stub = StubHTTP({"d/a-000000.tar": a, "d/a-000001.tar": b}, hold_at=len(a) // 2)
    try:
        got, first, errors = _iterate([stub.url("d/a-000000.tar"), stub.url("d/a-000001.tar")])
        _until(lambda: stub.full_gets("d/a-000001.tar") >= 1, "a request for the second shard")
        assert not any(key.startswith("s2-") for key in got[1:])  # the first shard is not over
        assert len(got) - 1 < 10
        stub.release.set()
        got[0].join(60)
        assert not errors, errors
        assert len(got) == 21 and stub.full_gets("d/a-000001.tar") == 1  # the reader took the one opened ahead
    finally:
        stub.release.set()
        stub.stop()


def test_a_shard_ends_in_small_parts(fast_retries, monkeypatch):
    """Parts grow after the first MiBs and shrink again before the end: the last bytes of a shard come in 1 MiB
    parts (several connections at once), not in one big part at one connection's rate."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    blob = bytes(range(256)) * ((24 << 20) // 256) + b"tail"  # 24 MiB and 4 bytes: parts of up to 6 MiB
    stub = StubHTTP({"big.tar": blob})
    try:
        with open_url(stub.url("big.tar")) as f:
            assert f.read() == blob
        ranges = sorted((int(a), int(b) + 1) for a, b in (r.split("=")[1].split("-") for _, r in stub.requests))
        assert ranges[0] == (0, LEAD) and ranges[-1][1] == len(blob)
        assert all(x[1] == y[0] for x, y in zip(ranges, ranges[1:], strict=False))  # every byte once
        assert max(end - start for start, end in ranges) > 2 * LEAD  # big parts in the middle
        assert [end - start for start, end in ranges[-3:]] == [LEAD, LEAD, LEAD + 4]  # small ones at the end
    finally:
        stub.stop()


@pytest.mark.parametrize(("offset", "part", "size", "want"), [
    (0, 8 << 20, None, LEAD),
    (64 << 20, 8 << 20, None, 8 << 20),
    (64 << 20, 8 << 20, 1 << 30, 8 << 20),  # far from the end: as before
    (64 << 20, 8 << 20, 80 << 20, 4 << 20),  # a quarter of what is left
    (78 << 20, 8 << 20, 80 << 20, LEAD),
    (79 << 20, 8 << 20, (80 << 20) + 10, LEAD + 10),  # a rest under 1 MiB joins the last part
    (0, 64 << 10, 1 << 20, 64 << 10),  # never more than the part size
])
def test_part_sizes(offset, part, size, want):
    assert span(offset, part, size) == want


def test_the_fetch_threads_start_without_holding_up_the_first_request(monkeypatch):
    """A process's fetchers start no thread until a task comes, then one, which starts the fetch threads: the
    first request of the first shard (sent by the reader's thread) does not wait for a dozen thread starts."""
    callers: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        callers.append(threading.current_thread().name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    me = threading.current_thread().name
    fetch = Fetchers(6)
    assert callers == []
    ran = threading.Event()
    fetch.submit((0, 0), ran.set)
    assert callers.count(me) == 1
    assert ran.wait(30)  # a hang guard: the fetch threads do start
    _until(lambda: len(callers) == 7, "six fetch threads")
    assert callers.count(me) == 1


def _ranges(stub: StubHTTP) -> list[tuple[int, int]]:
    """The byte ranges ``[start, end)`` the stub was asked for, in order of offset."""
    return sorted((int(a), int(b) + 1) for a, b in (r.split("=")[1].split("-") for _, r in stub.requests))


def _read_in_thread(url: str) -> tuple[threading.Thread, list]:
    got: list = []

    def read() -> None:
        with open_url(url) as f:
            got.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def test_a_new_servers_next_parts_go_out_with_its_first_request(fast_retries, monkeypatch):
    """The first object of a server not seen before: its next parts (``connections - 1``, 1 MiB each) are
    requested blind while its first answer is on its way; their answers state the size, so the parts after them
    are requested too before the first answer comes. Every byte is asked for once, over at most 4 connections."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    blob = bytes(range(256)) * ((6 << 20) // 256)  # 6 MiB: six parts of 1 MiB
    stub = StubHTTP({"w.tar": blob}, hold_first=True)
    try:
        thread, got = _read_in_thread(stub.url("w.tar"))
        _until(lambda: len(stub.requests) >= 6, "every part requested before the first answer")
        assert _ranges(stub) == [(i << 20, (i + 1) << 20) for i in range(6)]
        stub.release.set()
        thread.join(60)
        assert got == [blob]
        assert len(stub.requests) == 6 and stub.connections <= 4
    finally:
        stub.release.set()
        stub.stop()


def test_connections_are_opened_ahead_where_no_blind_part_fits_the_read_ahead(fast_retries, monkeypatch):
    """A stream on another server holds the whole read-ahead budget (2 parts of 1 MiB, unread), so the first
    object of a new server gets no blind part: while its first answer is on its way, the connections its parts
    will use are opened, with no request on them, and the parts planned after it find them in the pool."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", "1M")
    monkeypatch.setenv("SHARDSTREAM_HTTP_READAHEAD", "2M")
    blob = bytes(range(256)) * ((4 << 20) // 256)
    hog, stub = StubHTTP({"h.tar": blob}), StubHTTP({"w.tar": blob}, hold_first=True)
    try:
        with open_url(hog.url("h.tar")) as held:
            _until(lambda: len(hog.requests) == 3, "the blind parts of the stream that holds the budget")
            thread, got = _read_in_thread(stub.url("w.tar"))
            _until(lambda: stub.connections >= 4 and stub.requests, "connections opened before the first answer")
            assert len(stub.requests) == 1  # connections, not requests: no blind part fits the budget
            assert held.read(1) == blob[:1]
        stub.release.set()
        thread.join(60)
        assert got == [blob] and stub.connections <= 4
        assert _ranges(stub) == [(i << 20, (i + 1) << 20) for i in range(4)]
    finally:
        stub.release.set()
        stub.stop()
        hog.stop()


def test_blind_parts_past_the_end_of_a_small_object_are_dropped_quietly(fast_retries, monkeypatch, caplog):
    """A 100 KiB object on a new server: the blind parts (from 1 MiB on) are answered 416 while its first answer
    is held; they are dropped with no retry and no warning, and the object is read from its first answer."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    blob = bytes(range(256)) * 400
    stub = StubHTTP({"s.tar": blob}, hold_first=True)
    try:
        with caplog.at_level("INFO", logger="shardstream"):
            thread, got = _read_in_thread(stub.url("s.tar"))
            _until(lambda: len(stub.requests) >= 4, "the three blind parts")
            stub.release.set()
            thread.join(60)
        assert got == [blob]
        assert sorted(r for _, r in stub.requests) == [f"bytes={i << 20}-{((i + 1) << 20) - 1}" for i in range(4)]
        assert [r for r in caplog.records if r.levelname != "DEBUG"] == []
    finally:
        stub.release.set()
        stub.stop()


@pytest.mark.parametrize("held", ["first", "refused"], ids=["refused-before-the-first-answer", "refused-after-it"])
def test_a_failed_blind_part_is_requested_again_once_the_first_answer_covers_it(fast_retries, monkeypatch, held):
    """The blind parts are refused (403, a permanent error) while the first answer is held, or once it is in:
    the read does not fail, those parts are asked for again as ordinary parts, and every byte comes once."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    blob = bytes(range(256)) * ((5 << 20) // 256)
    blind = [f"bytes={i << 20}-{((i + 1) << 20) - 1}" for i in (1, 2, 3)]
    stub = StubHTTP({"r.tar": blob}, refuse_once=blind, hold_first=held == "first", hold_refused=held == "refused")
    opened = threading.Event()
    got: list = []

    def read() -> None:
        try:
            with open_url(stub.url("r.tar")) as f:  # returns once the first answer is in
                opened.set()
                got.append(f.read())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            got.append(e)

    try:
        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        if held == "first":
            _until(lambda: stub.refused == 3, "the blind parts refused")
        else:
            _until(opened.is_set, "the first answer")
        stub.release.set()
        thread.join(60)
        assert got == [blob]
        asked = [r for _, r in stub.requests]
        assert all(asked.count(r) == 2 for r in blind), asked
    finally:
        stub.release.set()
        stub.stop()


def test_the_link_emulator_charges_a_round_trip_to_open_a_connection():
    """With ``handshake``, a new connection's first request reaches the server 1.5 RTT after the connection was
    accepted (as SYN, SYN-ACK and the request would on a real link): its answer comes 2 RTT after the connect, at
    the soonest. Lower bounds only: a busy machine only adds time."""
    stub = StubHTTP({"a": b"x" * 100})
    try:
        with LinkEmulator(stub.port, delay=0.05, handshake=True) as emu:
            conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
            start = time.monotonic()
            conn.request("GET", "/a")
            assert conn.getresponse().read() == b"x" * 100
            assert time.monotonic() - start >= 0.2  # 1.5 RTT up, 0.5 RTT down
            conn.close()
    finally:
        stub.stop()
