"""iter_members on every tar dialect (ustar, GNU, PAX, v7, base-256 sizes) matches Python's tarfile; header helpers."""

from __future__ import annotations

import io
import tarfile
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardstream import _native
from shardstream.errors import ConfigError
from shardstream.tar import accelerated, checksum, iter_members, reader
from shardstream.tar.header import parse_number
from shardstream.tar.writer import TarStreamWriter

SAMPLES = [(f"s{i:04d}.{ext}", b"%s-%d" % (ext.encode(), i) * (i + 1)) for i in range(6) for ext in ("txt", "cls")]


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT], ids=str)
def test_small_archive_matches_tarfile(fmt, members, kit):
    data = kit.make_tar(SAMPLES + [("empty.txt", b""), ("block.bin", bytes(range(256)) * 2)], fmt)
    got = members(data)
    assert got == kit.reference(data)
    assert [(n, d) for n, d, _ in got[:-2]] == SAMPLES
    assert got[-2][1] == b"" and len(got[-1][1]) == 512


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT], ids=str)
def test_long_names(fmt, members, kit):
    names = ["d" * 120 + "/" + "n" * 130 + ".txt", "x" * 300 + ".cls", "short.txt"]
    data = kit.make_tar([(n, n.encode()[:40]) for n in names], fmt)
    got = members(data)
    assert [n for n, _, _ in got] == names
    assert got == kit.reference(data)


def test_ustar_prefix_names(members, kit):
    name = "p" * 100 + "/" + "q" * 90 + ".txt"  # fits ustar only as prefix + name
    data = kit.make_tar([(name, b"abc")], tarfile.USTAR_FORMAT)
    assert members(data) == [(name, b"abc", 512)]


def test_pax_unicode_names(members, kit):
    names = ["données/été.txt", "日本語/サンプル.cls", "emoji-🙂.json", "ü" * 150 + ".txt"]
    data = kit.make_tar([(n, n.encode()) for n in names], tarfile.PAX_FORMAT)
    got = members(data)
    assert [n for n, _, _ in got] == names
    assert got == kit.reference(data)


def test_pax_header_per_member_as_tarfile_writes_float_mtimes(members, kit):
    infos = []
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, payload in SAMPLES:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(payload), 1700000000.25
            tf.addfile(info, io.BytesIO(payload))
            infos.append(info)
    data = out.getvalue()
    assert data[156:157] == b"x"  # each member has its own PAX header
    assert members(data) == kit.reference(data)


def test_pax_global_header_without_path_changes_nothing(members, kit):
    data = kit.make_tar(SAMPLES, tarfile.PAX_FORMAT, pax_headers={"comment": "built by a test"})
    assert data[156:157] == b"g"
    assert members(data) == kit.reference(data)


def test_pax_global_path_applies_to_every_later_member(members, kit):
    glob = kit.pax((b"path", b"global.name"), typeflag=b"g")
    data = kit.entry(b"a.txt", b"1") + glob + kit.entry(b"b.txt", b"2") + kit.entry(b"c.txt", b"3") + kit.END
    assert members(data) == [("a.txt", b"1", 512), ("global.name", b"2", 2560), ("global.name", b"3", 3584)]


def test_pax_size_record_overrides_the_header(members, kit):
    pax = kit.pax((b"size", b"5"))
    data = pax + kit.raw_header(b"a.bin", 0) + kit.pad(b"hello") + kit.entry(b"b.txt", b"x") + kit.END
    assert members(data) == [("a.bin", b"hello", 1536), ("b.txt", b"x", 2560)]


def test_pax_path_wins_over_gnu_longname(members, kit):
    pax = kit.pax((b"path", b"pax.name"))
    long = kit.raw_header(b"././@LongLink", 10, b"L") + kit.pad(b"gnu.name\0\0")
    for extended in (pax + long, long + pax):
        data = extended + kit.entry(b"short", b"data") + kit.END
        assert [n for n, _, _ in members(data)] == ["pax.name"]


def test_empty_pax_value_unsets(members, kit):
    pax = kit.pax((b"path", b"pax.name"), (b"path", b""))
    assert members(pax + kit.entry(b"header.name", b"") + kit.END) == [("header.name", b"", 1536)]


def test_base256_size_field(members, kit):
    size = b"\x80" + (5).to_bytes(11, "big")
    data = kit.raw_header(b"a.bin", size) + kit.pad(b"hello") + kit.END
    assert members(data) == [("a.bin", b"hello", 512)]


def test_gnu_longname_and_longlink_from_tarfile(members, kit):
    target = "t" * 150
    entries = [kit.special("l" * 120, tarfile.SYMTYPE, linkname=target), ("f" * 140 + ".txt", b"x")]
    data = kit.make_tar(entries, tarfile.GNU_FORMAT)
    assert members(data) == [("f" * 140 + ".txt", b"x", kit.reference(data)[0][2])]


def test_non_regular_members_are_skipped(members, kit):
    entries = [
        kit.special("dir", tarfile.DIRTYPE),
        ("dir/a.txt", b"A"),
        kit.special("dir/link", tarfile.SYMTYPE, linkname="a.txt"),
        kit.special("dir/hard", tarfile.LNKTYPE, linkname="dir/a.txt"),
        kit.special("fifo", tarfile.FIFOTYPE),
        kit.special("null", tarfile.CHRTYPE, devmajor=1, devminor=3),
        kit.special("sda", tarfile.BLKTYPE, devmajor=8),
        ("dir/b.txt", b"B"),
    ]
    data = kit.make_tar(entries)
    got = members(data)
    assert [(n, d) for n, d, _ in got] == [("dir/a.txt", b"A"), ("dir/b.txt", b"B")]
    assert got == kit.reference(data)


def test_v7_header_and_v7_directory(members, kit):
    v7 = {"magic": bytes(8)}
    data = (
        kit.entry(b"olddir/", b"", b"\0", **v7)
        + kit.entry(b"olddir/a.txt", b"v7 data", b"\0", **v7)
        + kit.entry(b"b.txt", b"contiguous", b"7")
        + kit.END
    )
    assert members(data) == [("olddir/a.txt", b"v7 data", 1024), ("b.txt", b"contiguous", 2048)]
    assert members(data) == kit.reference(data)


def test_gnu_magic_ignores_the_prefix_area(members, kit):
    data = kit.entry(b"a.txt", b"x", magic=b"ustar  \0", prefix=b"00000000000\0") + kit.END
    assert members(data) == [("a.txt", b"x", 512)]


def test_unknown_types_are_skipped_with_their_data(members, kit):
    data = kit.entry(b"label", b"volume data" * 100, b"V") + kit.entry(b"a.txt", b"x") + kit.END
    assert members(data) == [("a.txt", b"x", 2048 + 512)]


def test_non_utf8_names_use_surrogateescape(members, kit):
    raw = b"caf\xe9-\xff.txt"
    name = raw.decode("utf-8", "surrogateescape")
    pax = kit.pax((b"hdrcharset", b"BINARY"), (b"path", b"\xfe\xfe.cls"))
    data = kit.entry(raw, b"1") + pax + kit.entry(b"ignored", b"2") + kit.END
    got = members(data)
    assert [n for n, _, _ in got] == [name, b"\xfe\xfe.cls".decode("utf-8", "surrogateescape")]
    assert got[0] == kit.reference(data)[0]
    assert got[0][0].encode("utf-8", "surrogateescape") == raw


def test_writer_output_reads_back(members):
    out = io.BytesIO()
    names = ["a.txt", "b" * 200 + ".txt", "c/" * 70 + "x.bin", "é" * 90 + ".cls"]
    with TarStreamWriter(out) as tw:
        offsets = [tw.add(n, n.encode() * 3) for n in names]
    assert members(out.getvalue()) == [(n, n.encode() * 3, o) for n, o in zip(names, offsets)]


@pytest.mark.parametrize("bufsize", [1, 100, 512, 513, 4096])
def test_small_buffers_and_short_reads(bufsize, members, kit):
    data = kit.make_tar(SAMPLES + [("big.bin", bytes(range(256)) * 300)], tarfile.PAX_FORMAT)
    expected = kit.reference(data)
    assert members(data, bufsize=bufsize) == expected
    assert members(lambda: kit.ShortReads(data, 7), bufsize=bufsize) == expected


def test_stops_after_the_end_marker_without_reading_further(members, kit):
    data = kit.entry(b"a.txt", b"x") + kit.END
    streams: list[io.BytesIO] = []

    def stream() -> io.BytesIO:
        streams.append(io.BytesIO(data + b"trailing garbage that is never read"))
        return streams[-1]

    assert members(stream, bufsize=512) == [("a.txt", b"x", 512)]
    assert [s.tell() for s in streams] == [len(data)] * len(streams)


def test_large_member_across_many_reads(members, kit):
    payload = bytes(range(256)) * 1000
    data = kit.make_tar([("a.txt", b"1"), ("big.bin", payload), ("z.txt", b"2")])
    assert members(lambda: kit.ShortReads(data, 4093), bufsize=4096) == kit.reference(data)


def test_accelerated_reflects_the_switch(monkeypatch):
    monkeypatch.setattr(reader, "USE_ACCELERATOR", False)
    assert accelerated() is False
    monkeypatch.setattr(reader, "USE_ACCELERATOR", True)
    assert accelerated() is (_native.extension is not None)


def test_explicit_accelerate_needs_the_extension(monkeypatch):
    monkeypatch.setattr(_native, "extension", None)
    with pytest.raises(ConfigError, match="not built"):
        iter_members(io.BytesIO(), accelerate=True)
    assert accelerated() is False


def test_bad_bufsize():
    with pytest.raises(ConfigError, match="bufsize"):
        iter_members(io.BytesIO(), bufsize=0)


def test_iterating_lazily_reads_lazily(kit):
    data = kit.make_tar(SAMPLES)
    stream = io.BytesIO(data)
    it = iter_members(stream, bufsize=512, accelerate=False)
    assert stream.tell() == 0
    assert next(it)[0] == SAMPLES[0][0]
    assert stream.tell() < len(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(it)) == len(SAMPLES) - 1


@given(st.binary(min_size=512, max_size=512))
def test_checksum_is_the_byte_sum_with_spaces(block):
    assert checksum(block) == sum(block[:148]) + 8 * 32 + sum(block[156:])


@pytest.mark.parametrize(
    "field, value",
    [
        (b"00000000017\0", 15),
        (b"     17 \0   ", 15),
        (b"\0" * 12, 0),
        (b" " * 8, 0),
        (b"777777777777", 8**12 - 1),  # twelve digits, no terminator (star)
        (b"\x80" + (9 * 2**30).to_bytes(11, "big"), 9 * 2**30),
        (b"\x81" + bytes(11), 2**88),  # GNU: the low 6 bits of the first byte belong to the number
        (b"\xff" * 12, -1),
        (b"\xff" * 11 + b"\xfe", -2),
    ],
)
def test_parse_number(field, value):
    assert parse_number(field) == value


def test_checksum_needs_a_whole_block():
    with pytest.raises(ConfigError, match="512 bytes"):
        checksum(b"short")
