"""Compressed shards: detection by content, decompression on non-seekable streams, errors as TarFormatError."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import sys

import pytest

from shardstream.errors import MissingDependencyError, TarFormatError
from shardstream.tar import iter_tar, open_tar_stream
from shardstream.tar.compress import compression

zstandard = pytest.importorskip("zstandard")

COMPRESSORS = {
    "gzip": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.fixture
def plain(kit) -> bytes:
    return kit.make_tar([(f"s{i}.{ext}", b"%d" % i * 300) for i in range(20) for ext in ("txt", "cls")])


@pytest.mark.parametrize("kind", COMPRESSORS)
def test_detected_by_content_on_short_reads(kind, plain, kit, accelerate):
    packed = COMPRESSORS[kind](plain)
    assert compression(packed[:10]) == kind
    expected = kit.reference(plain)
    assert list(iter_tar(io.BytesIO(packed), "misnamed.tar")) == expected
    assert list(iter_tar(kit.ShortReads(packed, 3), "x.tar.gz")) == expected  # type: ignore[arg-type]


def test_concatenated_streams(plain, kit):
    half = len(plain) // 2
    packed = gzip.compress(plain[:half]) + gzip.compress(plain[half:])
    zst = zstandard.ZstdCompressor()
    packed_zst = zst.compress(plain[:half]) + zst.compress(plain[half:])
    for data in (packed, packed_zst):
        assert list(iter_tar(io.BytesIO(data))) == kit.reference(plain)


def test_plain_tar_passes_through(plain, kit):
    stream = io.BufferedReader(io.BytesIO(plain))
    assert open_tar_stream(stream) is stream  # peekable: returned as it is
    assert list(iter_tar(kit.ShortReads(plain, 5))) == kit.reference(plain)  # type: ignore[arg-type]


def test_member_named_like_a_bz2_magic_is_plain_tar(members, kit):
    data = kit.entry(b"BZh9.txt", b"not bz2") + kit.END
    assert compression(data[:10]) is None
    assert list(iter_tar(io.BytesIO(data))) == [("BZh9.txt", b"not bz2", 512)]


@pytest.mark.parametrize("kind", COMPRESSORS)
def test_truncated_compressed_shard(kind, plain, accelerate):
    packed = COMPRESSORS[kind](plain)
    with pytest.raises(TarFormatError, match=f"truncated {kind} data|corrupt or truncated {kind}") as info:
        list(iter_tar(io.BytesIO(packed[: len(packed) // 2]), "cut.tar"))
    assert "cut.tar" in str(info.value) and info.value.__cause__ is not None


@pytest.mark.parametrize("kind", COMPRESSORS)
def test_corrupt_compressed_shard(kind, plain):
    packed = bytearray(COMPRESSORS[kind](plain))
    for i in range(12, len(packed) - 8, 7):
        packed[i] ^= 0x5A
    with pytest.raises(TarFormatError) as info:
        list(iter_tar(io.BytesIO(bytes(packed)), "bad.tar"))
    assert "bad.tar" in str(info.value)


def test_errors_of_the_stream_itself_are_not_format_errors(plain):
    class Broken(io.RawIOBase):
        def __init__(self, data: bytes):
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:  # type: ignore[override]
            if self._data.tell() > 100:
                raise ConnectionResetError("peer went away")
            return self._data.readinto(buffer)

    with pytest.raises(ConnectionResetError):
        list(iter_tar(Broken(gzip.compress(plain)), "net.tar.gz"))  # type: ignore[arg-type]


def test_zstd_without_zstandard(plain, monkeypatch):
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(MissingDependencyError, match=r"shardstream\[zstd\]"):
        open_tar_stream(io.BytesIO(COMPRESSORS["zstd"](plain)))


def test_empty_and_tiny_streams():
    for data in (b"", b"\x1f"):
        with pytest.raises(TarFormatError):
            list(iter_tar(io.BytesIO(data), "tiny.tar"))
    with pytest.raises(TarFormatError, match="gzip"):
        list(iter_tar(io.BytesIO(b"\x1f\x8b"), "tiny.tar.gz"))
