"""The ``.ten`` / ``.tb`` tensor binary format of webdataset (``tenbin``), written from its specification.

A buffer is a sequence of *chunks*; every chunk is::

    8 bytes   magic  b"~TenBin~"
    8 bytes   int64  payload length n (little-endian)
    n bytes   payload, then zero padding up to a multiple of 64 bytes

An array is two chunks: a header chunk, then a data chunk holding the raw C-order element bytes. The header
is a sequence of int64 words: the dtype code (ASCII, e.g. ``b"f4\\0\\0\\0\\0\\0\\0"``), an 8-byte ASCII info
string, the number of dimensions, then each dimension. A buffer holds any number of arrays and decodes to a
``list`` of arrays, as in webdataset.

Supported dtypes: float16/32/64, int8/16/32/64, uint8/16/32/64 (webdataset itself cannot read uint32 back).

>>> import numpy as np
>>> buf = encode_buffer([np.arange(6, dtype="int16").reshape(2, 3), np.ones(2, dtype="float32")])
>>> len(buf), [a.tolist() for a in decode_buffer(buf)]  # 4 chunks of 16 + 64 bytes
(320, [[[0, 1, 2], [3, 4, 5]], [1.0, 1.0]])
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

__all__ = ["MAGIC", "decode_buffer", "encode_buffer"]

MAGIC = b"~TenBin~"
_ALIGN = 64
_CODES = {
    "float16": b"f2",
    "float32": b"f4",
    "float64": b"f8",
    "int8": b"i1",
    "int16": b"i2",
    "int32": b"i4",
    "int64": b"i8",
    "uint8": b"u1",
    "uint16": b"u2",
    "uint32": b"u4",
    "uint64": b"u8",
}
_DTYPES = {code: np.dtype(name).newbyteorder("<") for name, code in _CODES.items()}
_MAX_RANK = 9


def _pad(n: int) -> int:
    return -n % _ALIGN


def _chunk(payload: bytes) -> bytes:
    return MAGIC + struct.pack("<q", len(payload)) + payload + bytes(_pad(len(payload)))


def _word(text: bytes) -> bytes:
    if len(text) > 8:
        raise ValueError(f"tenbin strings are at most 8 bytes, got {text!r}")
    return text.ljust(8, b"\0")


def encode_buffer(arrays: Sequence[np.ndarray] | np.ndarray, infos: Sequence[str] = ()) -> bytes:
    """Encode a list of arrays (or one array) into one tenbin buffer.

    >>> len(encode_buffer(np.zeros(3, dtype="uint8")))  # header chunk (16 + 64) + data chunk (16 + 64)
    160
    """
    if isinstance(arrays, np.ndarray):
        arrays = [arrays]
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"tenbin encodes a list of numpy arrays, not {type(arrays).__name__}")
    parts = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        code = _CODES.get(a.dtype.name)
        if code is None:
            raise ValueError(f"tenbin cannot store dtype {a.dtype}; supported: {', '.join(_CODES)}")
        if a.ndim > _MAX_RANK:
            raise ValueError(f"tenbin stores at most {_MAX_RANK} dimensions, got {a.ndim}")
        info = infos[i].encode("ascii") if i < len(infos) else b""
        header = _word(code) + _word(info) + struct.pack(f"<{1 + a.ndim}q", a.ndim, *a.shape)
        data = np.ascontiguousarray(a, dtype=_DTYPES[code]).tobytes()
        parts += [_chunk(header), _chunk(data)]
    return b"".join(parts)


def _chunks(buf: bytes | bytearray | memoryview) -> list[memoryview]:
    view = memoryview(buf)
    out, offset, total = [], 0, len(view)
    while offset < total:
        if bytes(view[offset : offset + 8]) != MAGIC:
            raise ValueError(f"not a tenbin buffer: bad magic at byte {offset}")
        if offset + 16 > total:
            raise ValueError("truncated tenbin buffer")
        (n,) = struct.unpack_from("<q", view, offset + 8)
        start = offset + 16
        if n < 0 or start + n > total:
            raise ValueError(f"truncated tenbin buffer: chunk at byte {offset} claims {n} bytes")
        out.append(view[start : start + n])
        offset = start + n + _pad(n)
    return out


def decode_buffer(buf: bytes | bytearray | memoryview) -> list[np.ndarray]:
    """Decode a tenbin buffer into a list of (writable) arrays.

    >>> decode_buffer(encode_buffer([np.array([1.5], dtype="float64")]))[0].tolist()
    [1.5]
    """
    chunks = _chunks(bytearray(buf))  # one copy, so the arrays are writable views into it
    if len(chunks) % 2:
        raise ValueError("tenbin buffer has a header without data")
    result = []
    for header, data in zip(chunks[::2], chunks[1::2], strict=True):
        if len(header) < 24:
            raise ValueError("tenbin header too short")
        code = bytes(header[:8]).rstrip(b"\0")
        dtype = _DTYPES.get(code)
        if dtype is None:
            raise ValueError(f"unsupported tenbin dtype code {code!r}")
        (rank,) = struct.unpack_from("<q", header, 16)
        if not 0 <= rank <= _MAX_RANK or len(header) < 24 + 8 * rank:
            raise ValueError(f"bad tenbin header: rank {rank}")
        shape = struct.unpack_from(f"<{rank}q", header, 24)
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize != len(data):
            needed = count * dtype.itemsize
            raise ValueError(f"tenbin data has {len(data)} bytes, shape {shape} of {dtype} needs {needed}")
        array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
        result.append(array.astype(dtype.newbyteorder("="), copy=False))
    return result
