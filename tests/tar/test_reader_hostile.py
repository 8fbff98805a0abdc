"""Broken and hostile input: truncation at every byte, bad checksums and fields, bogus PAX records, garbage.

The contract: a TarFormatError naming the url and an offset, or (only where the stream stops cleanly between
members) a TruncatedTarWarning with every complete member; never a partial member, another exception type,
or a hang. Both walks must agree byte for byte (the ``read`` fixture and ``kit.run`` check it).
"""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardstream.errors import TarFormatError

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def mixed_archive(kit) -> tuple[bytes, list[int], list[int]]:
    """An archive of every member kind; returns (bytes, header offsets, member boundaries), without END."""
    long_name = b"gnu/" * 30 + b"long.txt"
    pieces = [
        kit.entry(b"a.txt", b"hello"),
        kit.entry(b"dir/", b"", b"5"),
        kit.pax((b"path", b"pax/" * 30 + b"b.cls"), (b"mtime", b"1.5")) + kit.entry(b"b.cls", b"x" * 600),
        kit.raw_header(b"././@LongLink", len(long_name) + 1, b"L") + kit.pad(long_name + b"\0") + kit.entry(b"c", b"y"),
        kit.entry(b"link", b"", b"2"),
        kit.entry(b"empty.txt", b""),
        kit.entry(b"d.bin", bytes(range(256)) * 2),
    ]
    data, boundaries, headers = b"", [0], []
    for piece in pieces:
        headers.extend(len(data) + i for i in range(0, len(piece), 512) if _looks_like_header(piece[i : i + 512]))
        data += piece
        boundaries.append(len(data))
    return data, headers, boundaries


def _looks_like_header(block: bytes) -> bool:
    return block[257:262] == b"ustar"


def test_truncation_at_every_byte(read, kit):
    body, _, boundaries = mixed_archive(kit)
    data = body + kit.END
    full = read(data)
    assert full.error is None and not full.warnings and len(full.members) == 5
    end = len(body)
    for cut in range(len(data)):
        got = read(data[:cut])
        assert full.members[: len(got.members)] == got.members, cut  # never a partial or altered member
        if cut in boundaries[1:] or end + 512 <= cut:
            assert got.error is None, (cut, got.error)
            assert len(got.warnings) == 1 and "test.tar" in got.warnings[0], cut
            assert got.members == [m for m in full.members if m[2] + len(m[1]) <= cut], cut
        else:
            assert isinstance(got.error, TarFormatError), cut
            assert got.error.offset is not None and got.error.offset <= cut, cut
            assert "test.tar" in str(got.error) and not got.warnings, cut


def test_empty_stream_is_an_error(read):
    assert "empty stream" in str(read(b"").error)


def test_tarfile_padding_after_the_end_marker_is_fine(members, kit):
    data = kit.make_tar([("a.txt", b"1")])
    assert len(data) == 10240
    for cut in (2048, 3000, 10240):
        assert members(data[:cut]) == [("a.txt", b"1", 512)]


@pytest.mark.parametrize("offset_in_header, value", [(0, b"X"), (130, b"7"), (200, b"\x01"), (500, b"!")])
def test_bad_checksum(offset_in_header, value, read, kit):
    data = bytearray(kit.entry(b"a.txt", b"1") + kit.entry(b"b.txt", b"2") + kit.END)
    data[1024 + offset_in_header] ^= value[0] | 0x01
    got = read(bytes(data))
    assert got.members == [("a.txt", b"1", 512)]
    assert "checksum" in str(got.error) and got.error.offset == 1024


def test_signed_checksum_is_accepted(members, kit):
    header = bytearray(kit.raw_header(b"caf\xe9-\xff.txt", 1))
    signed = sum(b - 256 if b > 127 else b for b in header[:148] + header[156:]) + 256
    header[148:156] = b"%06o\0 " % signed
    assert signed != kit.block_checksum(header)
    name = b"caf\xe9-\xff.txt".decode("utf-8", "surrogateescape")
    assert members(bytes(header) + kit.pad(b"z") + kit.END) == [(name, b"z", 512)]


@pytest.mark.parametrize(
    "field, start, value",
    [
        ("size", 124, b"0000000001x\0"),
        ("size", 124, b"+0000000001\0"),
        ("size", 124, b"0o000000001\0"),
        ("size", 124, b"00000_00001\0"),
        ("checksum", 148, b"12345x\0 "),
        ("checksum", 148, b"-1234\0  "),
    ],
)
def test_garbage_in_numeric_fields(field, start, value, read, kit):
    header = bytearray(kit.raw_header(b"a.txt", 1))
    header[start : start + len(value)] = value
    if field != "checksum":
        header[148:156] = b"%06o\0 " % kit.block_checksum(header)
    got = read(bytes(header) + kit.pad(b"1") + kit.END)
    assert got.members == [] and f"garbage in the {field} field" in str(got.error)
    assert got.error.offset == 0


@pytest.mark.parametrize("size", [b"\xff" * 12, b"\x80" + (2**50).to_bytes(11, "big")], ids=["negative", "2**50"])
def test_impossible_sizes(size, read, kit):
    got = read(kit.raw_header(b"a.bin", size) + bytes(2048))
    assert "impossible member size" in str(got.error) and got.error.offset == 0


class RecordingStream(io.RawIOBase):
    """A stream over bytes that records the sizes asked of ``read``."""

    def __init__(self, data: bytes):
        self._stream, self.asked = io.BytesIO(data), []

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.asked.append(size)
        return self._stream.read(size)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("size", [9 * 2**30, 2**40], ids=["9GiB", "1TiB"])
def test_huge_declared_size_in_a_short_stream(size, read, kit):
    data = kit.raw_header(b"huge.bin", b"\x80" + size.to_bytes(11, "big")) + bytes(10_000)
    streams: list[RecordingStream] = []

    def stream() -> RecordingStream:
        streams.append(RecordingStream(data))
        return streams[-1]

    got = read(stream)
    assert "truncated tar member" in str(got.error) and got.error.offset == 0 and got.error.member == "huge.bin"
    assert max(max(s.asked) for s in streams) <= 1 << 24  # bounded reads, never read(size)


@pytest.mark.parametrize(
    "body",
    [
        b"99 path=x\n",
        b"abc path=x\n",
        b"5 path=abcdef\n",
        b"12 pathxxxx\n",
        b"-5 path=x\n",
        b"0 path=x\n",
        b" 10 path=x\n",
        b"6 =ab\n",
        b"8 path=x\n",
        b"12345678901234567890123 path=x\n",
    ],
)
def test_bogus_pax_records(body, read, kit):
    data = kit.raw_header(b"PaxHeader", len(body), b"x") + kit.pad(body) + kit.entry(b"a.txt", b"1") + kit.END
    got = read(data)
    assert got.members == [] and "PAX record" in str(got.error) and got.error.offset == 0


@pytest.mark.parametrize("value", [b"abc", b"-1", b"1e3", b" 5", b"9" * 20])
def test_bad_pax_size_values(value, read, kit):
    got = read(kit.pax((b"size", value)) + kit.entry(b"a.txt", b"1") + kit.END)
    assert got.members == [] and "bad PAX size" in str(got.error) and got.error.offset == 1024


@pytest.mark.parametrize("global_header", [False, True], ids=["x", "g"])
def test_sparse_members_are_refused(global_header, read, kit):
    sparse = kit.pax((b"GNU.sparse.major", b"1"), typeflag=b"g" if global_header else b"x")
    for data in (kit.entry(b"s.bin", b"abc", b"S") + kit.END, sparse + kit.entry(b"s.bin", b"abc") + kit.END):
        assert "sparse" in str(read(data).error)


def test_extended_header_without_its_member(read, kit):
    pax = kit.pax((b"path", b"x.txt"))
    assert "its member is missing" in str(read(pax + kit.END).error)
    got = read(pax)
    assert "not followed by its member" in str(got.error) and got.error.offset == 0


def test_lone_zero_block_in_the_middle(read, kit):
    data = kit.entry(b"a.txt", b"1") + bytes(512) + kit.entry(b"b.txt", b"2") + kit.END
    got = read(data)
    assert got.members == [("a.txt", b"1", 512)] and "lone zero block" in str(got.error)
    assert got.error.offset == 1024


def test_single_zero_block_at_the_end_warns(read, kit):
    got = read(kit.entry(b"a.txt", b"1") + bytes(512))
    assert got.members == [("a.txt", b"1", 512)] and "single zero block" in got.warnings[0]


def _outcomes(kit, data: bytes, bufsize: int = 1 << 20):
    """Both walks on ``data``: only TarFormatError may escape (run() lets anything else fail the test)."""
    outcomes = [kit.run(data, accelerate=walk, bufsize=bufsize).key() for walk in kit.walks]
    assert all(o == outcomes[0] for o in outcomes), "the C and Python walks disagree"
    return outcomes[0]


@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_garbage(kit, data):
    _outcomes(kit, data)
    _outcomes(kit, kit.raw_header(b"g.bin", len(data)) + data, bufsize=700)


@FUZZ
@given(
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    fix_checksums=st.booleans(),
    cut=st.integers(0, 12_000),
)
def test_mutated_archives(kit, edits, fix_checksums, cut):
    body, headers, _ = mixed_archive(kit)
    data = bytearray(body + kit.END)
    for index, value in edits:
        data[index % len(data)] = value
    if fix_checksums:  # mutations then reach the fields behind the checksum
        for h in headers:
            data[h + 148 : h + 156] = b"%06o\0 " % kit.block_checksum(data[h : h + 512])
    _outcomes(kit, bytes(data[:cut]), bufsize=1000)


@FUZZ
@given(body=st.binary(max_size=200) | st.lists(st.tuples(st.binary(max_size=12), st.binary(max_size=12))).map(
    lambda records: b"".join(b"%d %s=%s\n" % (len(k) + len(v) + 4, k, v) for k, v in records)
))
def test_random_pax_records(kit, body):
    _outcomes(kit, kit.raw_header(b"PaxHeader", len(body), b"x") + kit.pad(body) + kit.entry(b"a.txt", b"1") + kit.END)
