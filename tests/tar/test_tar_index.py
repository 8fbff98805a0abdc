"""The header-only scan (tar/index.py) decides exactly as the streaming reader: members, errors and warnings."""

from __future__ import annotations

import gzip
import io
import tarfile
import warnings

import pytest

from shardstream.errors import ConfigError, SampleFormatError, TarFormatError
from shardstream.tar import index as tar_index
from shardstream.tar.index import format_dali_index, scan_file, scan_members
from shardstream.tar.reader import TruncatedTarWarning, iter_members
from shardstream.tar.writer import TarStreamWriter


def outcome(fn):
    """(members, error text, warning texts) of one pass."""
    members, error = [], None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            members = fn()
        except TarFormatError as e:
            error = (str(e), e.offset, e.member)
    return members, error, [str(w.message) for w in caught if issubclass(w.category, TruncatedTarWarning)]


def same_as_stream(data: bytes, accelerate: bool, url: str = "x.tar"):
    """Scan and stream the same bytes; assert identical outcomes; return the scan's."""
    got = outcome(lambda: scan_members(data, url, accelerate=accelerate))
    want = outcome(lambda: [(n, o, len(d)) for n, d, o in iter_members(io.BytesIO(data), url, accelerate=False)])
    assert got == want
    return got


def archives(kit):
    """Valid and broken archives, named."""
    E, raw, pax = kit.entry, kit.raw_header, kit.pax
    longname = "d/" + "n" * 150 + ".txt"
    big = ("big.bin", bytes(range(256)) * 1200)  # larger than the C walk's window when it is set small
    yield "ustar", kit.make_tar([("a.txt", b"x"), ("a.cls", b""), ("b.txt", b"yy" * 300)])
    yield "gnu longname", kit.make_tar([(longname, b"1"), ("z.cls", b"2")], fmt=tarfile.GNU_FORMAT)
    yield "pax longname", kit.make_tar([(longname, b"1"), ("é/ü.txt", b"2")], fmt=tarfile.PAX_FORMAT)
    yield "pax size", E(b"a.bin", b"q" * 10) + pax((b"size", b"3")) + E(b"b.bin", b"abc") + kit.END
    yield "global pax path", pax((b"comment", b"hi"), typeflag=b"g") + E(b"c.txt", b"1") + kit.END
    yield "global pax changes", pax((b"path", b"g.txt"), typeflag=b"g") + E(b"c.txt", b"1") + kit.END
    yield "specials", kit.make_tar([kit.special("dir/", tarfile.DIRTYPE), ("dir/a.txt", b"1"),
                                    kit.special("l", tarfile.SYMTYPE, linkname="dir/a.txt")])  # fmt: skip
    yield "vendor type", E(b"V", b"label", b"V") + E(b"a.txt", b"1") + kit.END
    yield "big member", kit.make_tar([big, ("s.txt", b"s")] * 3)
    yield "many", kit.make_tar([(f"{i:04d}.txt", b"t" * (i % 700)) for i in range(400)])
    yield "no end marker", E(b"a.txt", b"1")
    yield "one zero block", E(b"a.txt", b"1") + bytes(512)
    yield "truncated data", E(b"a.txt", b"1" * 600)[:900]
    yield "truncated big data", E(b"a.bin", bytes(3 << 20))[: 2 << 20]
    yield "truncated big pax", (pax((b"comment", b"c" * (2 << 20))) + E(b"a.txt", b"1"))[: 1 << 20]
    yield "truncated header", E(b"a.txt", b"1") + raw(b"b.txt", 3)[:200]
    yield "bad checksum", E(b"a.txt", b"1") + raw(b"b.txt", 1, chksum=b"0000001\0") + kit.pad(b"1") + kit.END
    yield "zero block then data", E(b"a.txt", b"1") + bytes(512) + E(b"b.txt", b"1")
    yield "dangling extended", E(b"a.txt", b"1") + pax((b"path", b"zz")) + kit.END
    yield "sparse", E(b"s.bin", b"", b"S") + kit.END
    yield "garbage size", raw(b"a.txt", b"12345678z012") + kit.END


def test_scan_equals_the_streaming_reader(kit):
    for name, data in archives(kit):
        for accelerate in kit.walks:
            same_as_stream(data, accelerate)


def test_scan_finds_offsets_and_sizes(kit):
    data = kit.make_tar([("a/" + "x" * 120 + ".bin", bytes(1000)), ("b.txt", b"hello")], fmt=tarfile.PAX_FORMAT)
    members, error, warned = same_as_stream(data, accelerate=bool(kit.walks[-1]))
    assert error is None and not warned
    assert [(n, len(data[o : o + s])) for n, o, s in members] == [("a/" + "x" * 120 + ".bin", 1000), ("b.txt", 5)]
    assert data[members[1][1] : members[1][1] + 5] == b"hello" and members[1][1] % 512 == 0


def test_scan_file_maps_a_file(tmp_path):
    path = tmp_path / "s.tar"
    with open(path, "wb") as f, TarStreamWriter(f) as tw:
        tw.add("k.txt", b"hi")
    assert scan_file(path) == [("k.txt", 512, 2)]
    (tmp_path / "empty.tar").write_bytes(b"")
    with pytest.raises(TarFormatError, match="empty stream"):
        scan_file(tmp_path / "empty.tar")


def test_compressed_archives_are_refused_with_a_hint(kit):
    data = gzip.compress(kit.make_tar([("a.txt", b"1")]))
    with pytest.raises(ConfigError, match=r"'s.tar.gz' is gzip-compressed.*index the plain .tar"):
        scan_members(data, "s.tar.gz")


def test_scan_warnings_point_at_the_caller(kit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scan_members(kit.entry(b"a.txt", b"1"), "cut.tar")
    assert caught and caught[0].filename == __file__


def test_dali_format():
    text = format_dali_index([[("cls", 512, 1, "s0.cls"), ("txt", 1536, 9, "s0.txt")], [("jpg", 3072, 10, "d/s1.jpg")]])
    assert text == "v1.2 2\ncls 512 1 s0.cls txt 1536 9 s0.txt\njpg 3072 10 d/s1.jpg\n"
    assert format_dali_index([]) == "v1.2 0\n"
    with pytest.raises(SampleFormatError, match="whitespace") as info:
        format_dali_index([[("txt", 512, 1, "a b.txt")]], "w.tar")
    assert info.value.url == "w.tar" and info.value.member == "a b.txt"
