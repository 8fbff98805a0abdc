"""Decompression bombs: small fields that inflate to huge values (issue 18, item 2), built in memory.

Shared by ``tests/security/test_bombs.py`` (the decoders refuse each one with ``DecodeLimitError`` while the
process's peak memory stays small) and ``benchmarks/bench_hardening.py`` (peak RSS before and after the limits).
Each builder returns ``(field name, bytes)``; nothing here decodes anything.
"""

from __future__ import annotations

import gzip
import io
import struct
import zipfile
import zlib

import numpy as np

ZEROS = bytes(16 << 20)


def peak_rss_kb() -> int:
    """This process's peak resident memory in KiB: ``VmHWM`` of its own memory map. (``ru_maxrss`` is no good
    here: after ``fork`` + ``exec`` it keeps the parent's peak, so a child of a big test runner starts high.)"""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def gzip_bomb(inflated: int = 4 << 30) -> tuple[str, bytes]:
    """A ``.json.gz`` of about ``inflated / 1000`` bytes: gzip members of 64 MiB of ``0`` digits each, inside a
    JSON string (a valid document if it were ever inflated)."""
    member = gzip.compress(b"0" * (64 << 20), compresslevel=9, mtime=0)
    body = member * max(1, inflated // (64 << 20))
    return "x.json.gz", gzip.compress(b'"', mtime=0) + body + gzip.compress(b'"', mtime=0)


def _deflated(prefix: bytes, block: bytes, count: int, checksum=zlib.crc32) -> tuple[bytes, int]:
    """Raw deflate of ``prefix + block * count``, without deflating it all: after a full flush the compressor
    starts afresh, so every further ``block`` deflates to the same bytes. Returns ``(stream, checksum)`` of the
    inflated data (``zlib.crc32`` for zip, ``zlib.adler32`` for zlib streams)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(prefix + block) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    value = checksum(prefix + block)
    for _ in range(count - 1):
        value = checksum(block, value)
    return head + again * (count - 1) + b"\x03\x00", value  # then an empty final block


def npz_bomb(inflated: int = 2300 << 20) -> tuple[str, bytes]:
    """An ``.npz`` whose one member is ``inflated`` bytes of zeros (a float64 array), deflated (zip sizes honest)."""
    count = inflated // len(ZEROS)
    header = io.BytesIO()
    shape = (count * len(ZEROS) // 8,)
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    prefix = header.getvalue()
    stream, crc = _deflated(prefix, ZEROS, count)
    size = len(prefix) + count * len(ZEROS)
    name = b"a.npy"
    local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(stream), size, len(name), 0)
    central = struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, crc, len(stream), size,
                          len(name), 0, 0, 0, 0, 0, 0)
    offset = len(local) + len(name) + len(stream)
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 1, 1, len(central) + len(name), offset, 0)
    return "x.npz", local + name + stream + central + name + end


def npz_shape_bomb(shape: tuple[int, ...] = (1 << 20, 1 << 20)) -> tuple[str, bytes]:
    """An ``.npz`` whose member declares a huge shape but holds a few bytes (honest zip sizes)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.npy", header.getvalue() + bytes(64))
    return "x.npz", out.getvalue()


def npy_shape_bomb(shape: tuple[int, ...] = (1 << 40,)) -> tuple[str, bytes]:
    """An ``.npy`` declaring ``shape`` (8 TiB by default) followed by 16 bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return "x.npy", header.getvalue() + bytes(16)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bomb(width: int = 12_000, height: int = 12_000) -> tuple[str, bytes]:
    """A PNG of ``width`` x ``height`` RGBA pixels, 16 bits per channel, all zero (a few hundred KB)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 16, 6, 0, 0, 0)
    row = bytes(1 + width * 8)  # filter byte + pixels
    rows = max(1, (4 << 20) // len(row))
    stream, adler = _deflated(b"", row * rows, height // rows, zlib.adler32)
    left = height - rows * (height // rows)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = stream[:-2] + tail.compress(row * left) + tail.flush()  # the rest, in the final block
    adler = zlib.adler32(row * left, adler)
    body = b"\x78\xda" + stream + struct.pack(">I", adler)
    return "x.png", b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


def webp_bomb(width: int = 12_900, height: int = 12_900) -> tuple[str, bytes]:
    """A lossless WebP of a few dozen bytes whose header says ``width`` x ``height`` (a tiny image's bitstream
    with the size bits patched: libwebp reads the size from the header alone)."""
    import PIL.Image

    out = io.BytesIO()
    PIL.Image.new("RGB", (1, 1)).save(out, format="WEBP", lossless=True)
    data = bytearray(out.getvalue())
    at = data.index(b"VP8L") + 8  # chunk header: fourcc, size; then the 0x2f signature byte
    bits = struct.unpack_from("<I", data, at + 1)[0]
    bits = (bits & ~0x0FFFFFFF) | (width - 1) | ((height - 1) << 14)
    struct.pack_into("<I", data, at + 1, bits)
    return "x.webp", bytes(data)


def jpeg_bomb(width: int = 12_000, height: int = 12_000) -> tuple[str, bytes]:
    """A small JPEG whose frame header (SOF0) says ``width`` x ``height``."""
    import PIL.Image

    out = io.BytesIO()
    PIL.Image.new("RGB", (8, 8)).save(out, format="JPEG")
    data = bytearray(out.getvalue())
    at = data.index(b"\xff\xc0") + 5  # marker, length (2), precision (1): then height, width
    struct.pack_into(">HH", data, at, height, width)
    return "x.jpg", bytes(data)


ALL = {
    "json.gz 4 GB": gzip_bomb,
    "npz 2.3 GB": npz_bomb,
    "npz huge shape": npz_shape_bomb,
    "npy huge shape": npy_shape_bomb,
    "png 12000x12000x16bit": png_bomb,
    "webp 12900x12900": webp_bomb,
    "jpeg 12000x12000": jpeg_bomb,
}
