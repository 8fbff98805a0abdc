"""Remote reads whatever the server does (io/ranged.py, io/http.py): a server that ignores ``Range`` is read
within one part of memory, never with bytes repeated, and at most about twice over; an object whose size the
server does not state (``Content-Range: bytes 0-1048575/*``) is read to its end, never cut at its first part;
a ``Content-Range`` that makes no sense is an error."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
import tracemalloc
import warnings

import pytest
from fault_servers import StubHTTP

from shardstream.errors import OpenError
from shardstream.io import open_url
from shardstream.io.http import HttpStream, RangeIgnored, split_status_line
from shardstream.pipeline import tarfile_samples


@pytest.fixture
def parts_of_4m(monkeypatch, fast_retries):
    """The settings of the review: 32 MiB read ahead, 4 connections, 4 MiB parts."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_READAHEAD", "32M")
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", "4M")


def pattern(size: int, seed: int = 0) -> bytes:
    """``size`` bytes where every MiB differs from the others (a repeated or skipped stretch shows)."""
    return b"".join(hashlib.sha256(b"%d-%d" % (seed, i)).digest() * (1 << 15) for i in range(-(-size // (1 << 20))))[:size]


def a_tar(samples: int, size: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(samples):
            info = tarfile.TarInfo(f"{i:04d}.bin")
            info.size = size
            tf.addfile(info, io.BytesIO(pattern(size, i)))
    return out.getvalue()


def test_a_server_ignoring_range_is_read_within_one_part_of_memory(parts_of_4m):
    """A 48 MiB shard answered 200 (the whole body) to the first ranged GET, and a reader that stops after one
    byte: the stream holds at most one part (4 MiB) ahead of it, not the whole shard. The server is new, so the
    next parts went out blind with the first request (at most ``connections`` requests in all); each is answered
    200 too and closed with its body unread: what the server sent on them stays small."""
    blob = pattern(48 << 20)
    stub = StubHTTP({"big.tar": blob}, ranges=False)
    tracemalloc.start()
    try:
        with open_url(stub.url("big.tar")) as f:
            digest = hashlib.sha256(f.read(1))
            deadline = time.monotonic() + 30  # a bound, not a timing: whichever comes first ends the wait
            while stub.sent < len(blob) and getattr(f, "buffered", 0) < 4 << 20 and time.monotonic() < deadline:
                time.sleep(0.01)  # the reader is slow: the stream runs ahead as far as it may
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        stub.stop()
    assert digest.digest() == hashlib.sha256(blob).digest()
    assert peak < (4 << 20) + (2 << 20), f"{peak / 2**20:.1f} MiB held for a 48 MiB shard"
    assert len(stub.requests) <= 4 and stub.full_gets("big.tar") == 1  # the first, and blind parts closed unread
    # closed unread: what the socket buffers took before the close (up to ~4 MiB each on loopback), never a body
    assert stub.sent - len(blob) < len(blob) // 2, f"{(stub.sent - len(blob)) / 2**20:.1f} MiB sent on the blind parts"


def test_a_part_asked_blind_closes_a_whole_body_unread(fast_retries):
    """A part requested before the first answer (``ranged_only``) that gets the whole object (200) closes its
    connection at once: it does not read the 8 MiB before its start to skip them (the first answer carries them)."""
    blob = pattern(48 << 20)
    stub = StubHTTP({"big.tar": blob}, ranges=False)
    try:
        with pytest.raises(RangeIgnored, match="big.tar.*ignores Range"):
            HttpStream(stub.url("big.tar"), start=8 << 20, end=9 << 20, ranged_only=True)
        assert len(stub.requests) == 1  # refused, not retried
    finally:
        stub.stop()
    assert stub.sent < 8 << 20, f"{stub.sent / 2**20:.1f} MiB sent"  # what socket buffers took: never the skip


def test_a_200_after_a_ranged_shard_repeats_no_bytes(parts_of_4m):
    """The parts of the second shard go out with its first (planned on the size of the first shard of the
    server); when its first answer is the whole body (200), those parts are dropped, not read after it."""
    first, second = pattern(6 << 20, 1), pattern(6 << 20, 2)
    stub = StubHTTP({"a.tar": first, "b.tar": second})
    try:
        with open_url(stub.url("a.tar")) as f:
            assert f.read() == first
        stub.flags["ranges"] = False
        with open_url(stub.url("b.tar")) as f:
            got = f.read()
        assert len(got) == len(second) and got == second
    finally:
        stub.stop()


def test_parts_answered_200_read_on_rather_than_each_download_from_0(monkeypatch, fast_retries):
    """A server that answers a Range from byte 0 (206 with the size) but 200 to the others: the first part
    answered 200 reads on to the end (its parts after it are dropped), so the shard is sent about once more,
    not once per part."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "4")
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", "1M")
    monkeypatch.setenv("SHARDSTREAM_HTTP_READAHEAD", "16M")
    blob = pattern(16 << 20, 3)
    stub = StubHTTP({"a.tar": blob}, ranges="first")
    try:
        with open_url(stub.url("a.tar")) as f:
            assert f.read() == blob
    finally:
        stub.stop()
    assert stub.sent <= 3 * len(blob), f"{stub.sent / len(blob):.1f} times the shard sent, {len(stub.requests)} GETs"


@pytest.mark.parametrize("size", [300_000, 1 << 20, 6_500_000], ids=["under-a-part", "one-part", "many-parts"])
def test_an_object_of_unknown_size_is_read_to_its_end(parts_of_4m, size):
    """``Content-Range: bytes 0-1048575/*``: the reader goes on asking until the object ends."""
    blob = pattern(size, 4)
    stub = StubHTTP({"a.tar": blob}, unknown_total=True)
    try:
        with open_url(stub.url("a.tar")) as f:
            assert f.read() == blob and f.size is None
    finally:
        stub.stop()


def test_a_shard_of_unknown_size_gives_every_sample(parts_of_4m):
    """96 samples of 64 KiB (6 MiB): all of them, without a TruncatedTarWarning (the review got 16)."""
    stub = StubHTTP({"u/a.tar": a_tar(96, 64 << 10)}, unknown_total=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            samples = list(tarfile_samples([stub.url("u/a.tar")]))
    finally:
        stub.stop()
    assert [s["__key__"] for s in samples] == [f"{i:04d}" for i in range(96)]
    assert all(s["bin"] == pattern(64 << 10, i) for i, s in enumerate(samples))


@pytest.mark.parametrize(("header", "problem"), [
    ("bytes -5-10/100", "not 'bytes FIRST-LAST/TOTAL'"),
    ("bytes 10--5/100", "not 'bytes FIRST-LAST/TOTAL'"),
    ("bytes 10-5/100", r"the first byte \(10\) is after the last \(5\)"),
    ("bytes 0-100/100", r"the last byte \(100\) is not within the total \(100\)"),
    ("bytes 0-99999999999999999999/*", "not 'bytes FIRST-LAST/TOTAL'"),
    ("bytes 0-9223372036854775808/*", r"beyond 2\*\*63 - 1"),
    ("bytes 0-1/2x", "not 'bytes FIRST-LAST/TOTAL'"),
    ("items 0-1/2", "not 'bytes FIRST-LAST/TOTAL'"),
    ("", "not 'bytes FIRST-LAST/TOTAL'"),
])
def test_a_content_range_that_makes_no_sense_is_rejected(header, problem):
    with pytest.raises(ValueError, match=problem):
        split_status_line(header)


def test_a_content_range_gives_its_first_and_last_byte_and_the_total():
    from shardstream.io.http import parse_content_range  # noqa: PLC0415 - new with the checks

    assert parse_content_range(" BYTES 5-9/10 ") == (5, 9, 10) and parse_content_range("bytes 0-0/*") == (0, 0, None)
    assert split_status_line("bytes 100-199/1000") == (100, 1000)


def test_a_content_range_past_its_total_fails_the_read_naming_the_shard(fast_retries, monkeypatch):
    """A 206 whose last byte is not within its total is retried like a header cut short, then an OpenError."""
    stub = StubHTTP({"a.tar": pattern(1000)})
    reply = stub._reply

    def past_total(h, status, body, headers=None, **kw):
        if headers and "Content-Range" in headers:
            headers = {**headers, "Content-Range": "bytes 0-1000/1000"}
        reply(h, status, body, headers, **kw)

    monkeypatch.setattr(stub, "_reply", past_total)  # the stub's answers, with that Content-Range
    try:
        with pytest.raises(OpenError, match=r"a\.tar.*Content-Range.*not within the total"):
            open_url(stub.url("a.tar")).read()
    finally:
        stub.stop()


def test_a_part_waiting_for_its_reader_holds_no_fetch_thread(monkeypatch, fast_retries):
    """A part that reads on to the end (its answer was 200) waits for its reader; with 2 connections there is one
    fetch thread, shared by every shard: another shard must still be read while the first one is not."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_CONNECTIONS", "2")
    monkeypatch.setenv("SHARDSTREAM_HTTP_PART_SIZE", "1M")
    monkeypatch.setenv("SHARDSTREAM_HTTP_READAHEAD", "4M")
    first, second = pattern(16 << 20, 5), pattern(4 << 20, 6)
    odd, fine = StubHTTP({"a.tar": first}, ranges="first"), StubHTTP({"b.tar": second})
    got: list[bytes] = []
    try:
        with open_url(odd.url("a.tar")) as f:
            assert f.read(1) == first[:1]
            deadline = time.monotonic() + 30  # until its second part waits for this reader (a hang guard)
            while f.buffered < (2 << 20) - 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            def read_the_other() -> None:
                with open_url(fine.url("b.tar")) as g:
                    got.append(g.read())

            reader = threading.Thread(target=read_the_other, daemon=True)
            reader.start()
            reader.join(60)  # a hang guard: the other shard's parts wait for a fetch thread that never comes back
            assert got == [second]
            assert f.read() == first[1:]
    finally:
        odd.stop()
        fine.stop()
