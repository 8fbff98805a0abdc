"""The .ten format, checked byte by byte against a buffer built by hand from the layout."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from shardstream.codecs import tenbin


def chunk(payload: bytes) -> bytes:
    return b"~TenBin~" + struct.pack("<q", len(payload)) + payload + b"\0" * (-len(payload) % 64)


def test_exact_layout():
    a = np.arange(6, dtype="<i2").reshape(2, 3)
    header = b"i2".ljust(8, b"\0") + b"\0" * 8 + struct.pack("<3q", 2, 2, 3)
    expected = chunk(header) + chunk(a.tobytes())
    assert tenbin.encode_buffer([a]) == expected
    assert len(expected) == 2 * (16 + 64)


def test_reads_hand_built_buffer_with_info_and_scalars():
    header = b"f8".ljust(8, b"\0") + b"info".ljust(8, b"\0") + struct.pack("<q", 0)
    buf = chunk(header) + chunk(struct.pack("<d", 2.5))
    (out,) = tenbin.decode_buffer(buf)
    assert out.shape == () and out.dtype == np.float64 and float(out) == 2.5


DTYPES = "float16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64".split()


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(dtype):
    arrays = [np.arange(24).reshape(2, 3, 4).astype(dtype), np.zeros((0, 5), dtype=dtype), np.array(7, dtype=dtype)]
    out = tenbin.decode_buffer(tenbin.encode_buffer(arrays))
    assert len(out) == 3
    for a, b in zip(arrays, out):
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
        assert b.flags.writeable


def test_non_contiguous_and_big_endian_inputs():
    a = np.arange(20, dtype=">i4").reshape(4, 5)[:, ::2]
    (b,) = tenbin.decode_buffer(tenbin.encode_buffer(a))
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    "buf, message",
    [
        (b"garbage!" + b"\0" * 8, "bad magic"),
        (chunk(b"f4".ljust(8, b"\0") + b"\0" * 8 + struct.pack("<2q", 1, 3)), "header without data"),
        (chunk(b"zz".ljust(8, b"\0") + b"\0" * 8 + struct.pack("<2q", 1, 1)) + chunk(b"x"), "dtype code"),
        (chunk(b"f4".ljust(8, b"\0") + b"\0" * 8 + struct.pack("<2q", 1, 3)) + chunk(b"\0" * 8), "needs 12"),
        (b"~TenBin~" + struct.pack("<q", 1000) + b"abc", "truncated"),
    ],
)
def test_corrupt_buffers(buf, message):
    with pytest.raises(ValueError, match=message):
        tenbin.decode_buffer(buf)


def test_unsupported_inputs():
    with pytest.raises(ValueError, match="dtype"):
        tenbin.encode_buffer([np.array([True])])
    with pytest.raises(TypeError):
        tenbin.encode_buffer("not arrays")  # type: ignore[arg-type]
