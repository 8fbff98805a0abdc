"""TarStreamWriter: deterministic bytes, ustar/PAX headers, record padding, interop with tarfile and GNU tar."""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import tarfile

import numpy as np
import pytest

from shardstream.errors import ConfigError
from shardstream.tar.header import BLOCKSIZE, parse_header, parse_number, parse_pax_records
from shardstream.tar.writer import (
    PAX_SIZE_LIMIT,
    RECORDSIZE,
    TarStreamWriter,
    archive_size,
    member_header,
    member_size,
)

LONG_150 = "dir-" + "a" * 60 + "/" + "b" * 80 + ".txt"  # 150 bytes: fits ustar prefix + name
LONG_300 = "d" * 150 + "/" + "e" * 140 + ".seg.png"  # 300 bytes: needs a PAX path record
NO_SLASH_150 = "x" * 146 + ".txt"  # cannot be split at a '/': PAX
UNICODE = "données/échantillon-ü.txt"
MEMBERS = [
    ("a.txt", b"hello"),
    ("a.cls", b"3"),
    ("empty.bin", b""),
    ("block.bin", bytes(range(256)) * 2),  # exactly one block
    (LONG_150, b"long"),
    (LONG_300, b"longer"),
    (NO_SLASH_150, b"noslash"),
    (UNICODE, "ü".encode()),
    ("big/data.bin", os.urandom(300_000)),  # written straight from the caller's buffer
]


def write(members, **kw) -> tuple[bytes, list[int]]:
    out = io.BytesIO()
    tw = TarStreamWriter(out, **kw)
    offsets = [tw.add(name, data) for name, data in members]
    tw.close()
    assert tw.bytes_written == len(out.getvalue())
    return out.getvalue(), offsets


def headers(archive: bytes) -> list[tuple[int, bytes, int]]:
    """(offset, typeflag, size) of every header block, walking the archive by hand."""
    found, pos = [], 0
    while pos < len(archive) and archive[pos : pos + BLOCKSIZE] != bytes(BLOCKSIZE):
        header = parse_header(archive[pos : pos + BLOCKSIZE])
        found.append((pos, bytes([header.typeflag]), header.size))
        pos += BLOCKSIZE + header.size + (-header.size % BLOCKSIZE)
    return found


def test_tarfile_reads_names_data_and_offsets():
    archive, offsets = write(MEMBERS)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        infos = tf.getmembers()
        assert [m.name for m in infos] == [name for name, _ in MEMBERS]
        for info, (_, data), offset in zip(infos, MEMBERS, offsets):
            assert info.isreg() and info.size == len(data) and info.offset_data == offset
            assert info.mode == 0o444 and info.uid == info.gid == 0 and info.mtime == 0
            assert info.uname == info.gname == "bigdata"
            assert tf.extractfile(info).read() == data
            assert archive[offset : offset + len(data)] == data


def test_same_members_same_bytes():
    assert write(MEMBERS)[0] == write(MEMBERS)[0]


def test_byte_identical_to_tarfile_ustar():
    """What webdataset's TarWriter(mtime=0) writes through tarfile, for every name ustar can hold."""
    members = [(n, d) for n, d in MEMBERS if n not in (LONG_300, NO_SLASH_150)]
    ref = io.BytesIO()
    with tarfile.open(fileobj=ref, mode="w|", format=tarfile.USTAR_FORMAT, encoding="utf-8") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o444, "bigdata", "bigdata"
            tf.addfile(info, io.BytesIO(data))
    assert write(members)[0] == ref.getvalue()


def test_pax_only_when_needed():
    short = write([("a.txt", b"x"), (LONG_150, b"y"), (UNICODE, b"z")])[0]
    assert [flag for _, flag, _ in headers(short)] == [b"0"] * 3
    flags = [flag for _, flag, _ in headers(write([("a.txt", b"x"), (LONG_300, b"y"), (NO_SLASH_150, b"z")])[0])]
    assert flags == [b"0", b"x", b"0", b"x", b"0"]


def test_long_name_pax_record_and_truncated_ustar_name():
    archive = write([(LONG_300, b"data")])[0]
    (pax_at, _, pax_size), (ustar_at, _, _) = headers(archive)
    assert archive[pax_at : pax_at + 14] == b"././@PaxHeader"
    records = parse_pax_records(archive[pax_at + BLOCKSIZE : pax_at + BLOCKSIZE + pax_size])
    assert records == {"path": LONG_300.encode()}
    assert parse_header(archive[ustar_at : ustar_at + BLOCKSIZE]).name == LONG_300.encode()[:100]


def test_non_ascii_long_name_cut_at_character_boundary():
    name = "é" * 120 + ".txt"  # 244 bytes, no '/': PAX; the ustar field must not end in half a character
    header = member_header(name, 1)
    field = header[-BLOCKSIZE:][:100].rstrip(b"\0")
    field.decode("utf-8")  # no exception: whole characters only
    assert len(field) == 100
    archive = write([(name, b"1")])[0]
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        assert tf.getnames() == [name]


def test_shortest_prefix_split_like_tarfile():
    name = "a" * 5 + "/" + "b" * 5 + "/" + "c" * 86 + ".txt"  # 102 bytes: two possible splits
    block = member_header(name, 0)
    assert len(block) == BLOCKSIZE
    assert block[345:500].rstrip(b"\0") == b"aaaaa" and block[:100].rstrip(b"\0") == name[6:].encode()


def test_leading_slash_never_becomes_an_empty_prefix():
    name = "/" + "s" * 120 + ".txt"  # the only '/' is the first byte: splitting there would lose it
    archive = write([(name, b"x")])[0]
    assert [flag for _, flag, _ in headers(archive)] == [b"x", b"0"]
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        assert tf.getnames() == [name]


@pytest.mark.parametrize("size", [PAX_SIZE_LIMIT - 1, PAX_SIZE_LIMIT, 9 * 2**30, 5 * 2**40])
def test_huge_member_header_without_writing_the_data(size):
    header = member_header("huge/member.bin", size)
    needs_pax = size >= PAX_SIZE_LIMIT
    assert len(header) == (3 if needs_pax else 1) * BLOCKSIZE
    ustar = header[-BLOCKSIZE:]
    assert parse_header(ustar).size == size  # base-256 in the ustar field too: PAX-blind readers stay in step
    if needs_pax:
        assert ustar[124] & 0x80
        assert parse_pax_records(header[BLOCKSIZE : 2 * BLOCKSIZE]) == {"size": str(size).encode()}
    # Python's tarfile parses the header (it never needs the data to read the header)
    info = tarfile.open(fileobj=io.BytesIO(header + bytes(2 * BLOCKSIZE)), mode="r:").next()
    assert (info.name, info.size, info.isreg()) == ("huge/member.bin", size, True)
    assert member_size("huge/member.bin", size) == len(header) + size + (-size % BLOCKSIZE)


def test_huge_member_and_long_name_share_one_pax_header():
    header = member_header(LONG_300, 9 * 2**30)
    assert len(header) == 3 * BLOCKSIZE
    records = parse_pax_records(header[BLOCKSIZE : 2 * BLOCKSIZE])
    assert records == {"path": LONG_300.encode(), "size": str(9 * 2**30).encode()}
    info = tarfile.open(fileobj=io.BytesIO(header + bytes(2 * BLOCKSIZE)), mode="r:").next()
    assert (info.name, info.size) == (LONG_300, 9 * 2**30)


def test_end_of_archive_and_record_padding():
    empty = write([])[0]
    assert empty == bytes(RECORDSIZE)
    for members in ([("a", b"x")], MEMBERS):
        archive, _ = write(members)
        assert len(archive) % RECORDSIZE == 0
        end = headers(archive)[-1]
        last_data_end = end[0] + BLOCKSIZE + end[2] + (-end[2] % BLOCKSIZE)
        assert len(archive) == archive_size(last_data_end)
        assert archive[last_data_end:] == bytes(len(archive) - last_data_end)
        assert len(archive) - last_data_end >= 2 * BLOCKSIZE


def test_member_size_matches_what_add_writes():
    tw = TarStreamWriter(io.BytesIO())
    for name, data in MEMBERS:
        before = tw.bytes_written
        tw.add(name, data)
        assert tw.bytes_written - before == member_size(name, len(data))


def test_fast_path_headers_equal_member_header():
    """add() assembles common headers by a faster route than member_header(); both must give the same bytes."""
    rng = random.Random(1)
    alphabet = "abc/._-é漢"
    zeros = memoryview(bytes(1 << 20))
    for _ in range(500):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))).encode()[:100]
        size = rng.choice([0, 1, 511, 512, 513, rng.randrange(1 << 20)])
        kw = {"mtime": rng.randrange(8**11), "mode": rng.randrange(0o10000), "uname": rng.choice(["", "me", "x" * 32])}
        out = io.BytesIO()
        tw = TarStreamWriter(out, **kw)
        tw.add(name, zeros[:size])
        tw.flush()
        assert out.getvalue()[:BLOCKSIZE] == member_header(name, size, **kw)


def test_bytes_like_data_and_settings():
    array = np.arange(10, dtype=np.float32)
    members = [("a.bin", bytearray(b"ab")), ("b.bin", memoryview(b"cd")), ("c.bin", array), ("d.bin", array[::2])]
    archive, _ = write(members, mtime=1_700_000_000, mode=0o644, uname="u", gname="g")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        got = {m.name: (tf.extractfile(m).read(), m.mtime, m.mode, m.uname, m.gname) for m in tf}
    assert got["a.bin"] == (b"ab", 1_700_000_000, 0o644, "u", "g")
    assert got["b.bin"][0] == b"cd"
    assert got["c.bin"][0] == array.tobytes() and got["d.bin"][0] == array[::2].tobytes()


class Trickle(io.RawIOBase):
    """A raw stream that accepts at most 100 bytes per write call, as raw streams may."""

    def __init__(self):
        self.out = bytearray()

    def writable(self):
        return True

    def write(self, data):
        chunk = bytes(memoryview(data)[:100])
        self.out += chunk
        return len(chunk)


def test_partial_raw_writes_are_completed():
    trickle = Trickle()
    with TarStreamWriter(trickle) as tw:
        for name, data in MEMBERS:
            tw.add(name, data)
    assert bytes(trickle.out) == write(MEMBERS)[0]


def test_close_ends_archive_but_not_stream_and_is_idempotent():
    out = io.BytesIO()
    tw = TarStreamWriter(out)
    tw.add("a.txt", b"x")
    tw.close()
    tw.close()
    assert not out.closed and len(out.getvalue()) == RECORDSIZE
    with pytest.raises(ConfigError):
        tw.add("b.txt", b"y")


def test_exception_in_with_block_writes_no_end_of_archive():
    out = io.BytesIO()
    with pytest.raises(RuntimeError):
        with TarStreamWriter(out) as tw:
            tw.add("a.txt", b"x")
            tw.flush()
            raise RuntimeError
    assert len(out.getvalue()) == 2 * BLOCKSIZE  # the member, no end blocks


@pytest.mark.parametrize("name", ["", "a\0b"])
def test_bad_names(name):
    with pytest.raises(ConfigError):
        TarStreamWriter(io.BytesIO()).add(name, b"")


@pytest.mark.parametrize(
    "kw", [{"mtime": -1}, {"mtime": 8**11}, {"mtime": "0"}, {"mode": 0o10000}, {"uname": "u" * 33}]
)
def test_bad_settings(kw):
    with pytest.raises(ConfigError):
        TarStreamWriter(io.BytesIO(), **kw)


def test_checksum_and_numeric_fields_are_canonical():
    block = member_header("a.txt", 5)
    assert block[148:156] == b"%06o\0 " % parse_number(block[148:156])
    assert block[124:136] == b"00000000005\0" and block[100:108] == b"0000444\0"
    assert block[257:265] == b"ustar\x0000" and block[156:157] == b"0"


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar is not installed")
def test_gnu_tar_lists_and_extracts(tmp_path):
    archive = write(MEMBERS)[0]
    path = tmp_path / "out.tar"
    path.write_bytes(archive)
    env = dict(os.environ, LC_ALL="C.UTF-8")
    listing = subprocess.run(["tar", "-tf", str(path)], capture_output=True, env=env, check=True)
    assert listing.stdout.decode("utf-8").splitlines() == [name for name, _ in MEMBERS]
    assert not listing.stderr
    verbose = subprocess.run(["tar", "-tvf", str(path)], capture_output=True, env=env, check=True)
    lines = verbose.stdout.decode("utf-8").splitlines()
    assert len(lines) == len(MEMBERS) and all(line.startswith("-r--r--r-- bigdata/bigdata") for line in lines)
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["tar", "-xf", str(path), "-C", str(dest)], capture_output=True, env=env, check=True)
    for name, data in MEMBERS:
        assert (dest / name).read_bytes() == bytes(data)
