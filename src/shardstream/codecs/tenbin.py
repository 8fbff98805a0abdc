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

import functools
import struct
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from .._lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")  # loads with the first array, not with shardstream

__all__ = [
    "MAGIC",
    "decode_buffer",
    "decode_chunks",
    "decode_header",
    "decode_list",
    "encode_buffer",
    "encode_chunks",
    "encode_header",
    "encode_list",
    "load",
    "read",
    "read_chunk",
    "save",
    "write",
    "write_chunk",
]

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


@functools.cache
def _dtypes() -> dict[bytes, np.dtype]:
    """code -> little-endian dtype (made on first use: numpy loads with the first array)."""
    return {code: np.dtype(name).newbyteorder("<") for name, code in _CODES.items()}

_MAX_RANK = 9


def _pad(n: int) -> int:
    return -n % _ALIGN


def _chunk(payload: bytes) -> bytes:
    return MAGIC + struct.pack("<q", len(payload)) + payload + bytes(_pad(len(payload)))


def _word(text: bytes) -> bytes:
    if len(text) > 8:
        raise ValueError(f"tenbin strings are at most 8 bytes, got {text!r}")
    return text.ljust(8, b"\0")


def encode_buffer(arrays: Sequence[np.ndarray] | np.ndarray, infos: Sequence[str] | None = ()) -> bytes:
    """Encode a list of arrays (or one array) into one tenbin buffer.

    >>> len(encode_buffer(np.zeros(3, dtype="uint8")))  # header chunk (16 + 64) + data chunk (16 + 64)
    160
    """
    return b"".join(_chunk(part) for part in encode_list(arrays, infos))


def encode_header(a: np.ndarray, info: str = "") -> bytes:
    """The header chunk's payload for array ``a``: dtype code, info string, rank, shape (int64 words)."""
    a = np.asarray(a)
    code = _CODES.get(a.dtype.name)
    if code is None:
        raise ValueError(f"tenbin cannot store dtype {a.dtype}; supported: {', '.join(_CODES)}")
    if a.ndim > _MAX_RANK:
        raise ValueError(f"tenbin stores at most {_MAX_RANK} dimensions, got {a.ndim}")
    return _word(code) + _word(info.encode("ascii")) + struct.pack(f"<{1 + a.ndim}q", a.ndim, *a.shape)


def encode_list(arrays: Sequence[np.ndarray] | np.ndarray, infos: Sequence[str] | None = ()) -> list[bytes]:
    """The chunk payloads (header, data, header, data...) of a list of arrays.

    >>> [len(p) for p in encode_list([np.zeros(2, "uint8")])]
    [32, 2]
    """
    if isinstance(arrays, np.ndarray):
        arrays = [arrays]
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"tenbin encodes a list of numpy arrays, not {type(arrays).__name__}")
    infos = infos or ()
    parts = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        parts.append(encode_header(a, infos[i] if i < len(infos) else ""))
        parts.append(np.ascontiguousarray(a, dtype=_dtypes()[_CODES[a.dtype.name]]).tobytes())
    return parts


def encode_chunks(payloads: Sequence[bytes]) -> bytes:
    """Frame payloads as chunks (magic, length, payload, padding)."""
    return b"".join(_chunk(bytes(p)) for p in payloads)


def decode_chunks(buf: bytes | bytearray | memoryview) -> list[memoryview]:
    """The payloads of the chunks of ``buf``."""
    return _chunks(buf)


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


def decode_buffer(buf: bytes | bytearray | memoryview, infos: bool = False) -> Any:
    """Decode a tenbin buffer into a list of (writable) arrays; with ``infos=True``, ``(arrays, infos)``.

    >>> decode_buffer(encode_buffer([np.array([1.5], dtype="float64")]))[0].tolist()
    [1.5]
    >>> decode_buffer(encode_buffer([np.zeros(1, "uint8")], ["mask"]), infos=True)[1]
    ['mask']
    """
    return decode_list(_chunks(bytearray(buf)), infos)  # one copy, so the arrays are writable views into it


def decode_header(header: bytes | memoryview) -> tuple[tuple[int, ...], np.dtype, str]:
    """``(shape, dtype, info)`` from a header chunk's payload."""
    if len(header) < 24:
        raise ValueError("tenbin header too short")
    code = bytes(header[:8]).rstrip(b"\0")
    dtype = _dtypes().get(code)
    if dtype is None:
        raise ValueError(f"unsupported tenbin dtype code {code!r}")
    (rank,) = struct.unpack_from("<q", header, 16)
    if not 0 <= rank <= _MAX_RANK or len(header) < 24 + 8 * rank:
        raise ValueError(f"bad tenbin header: rank {rank}")
    return struct.unpack_from(f"<{rank}q", header, 24), dtype, bytes(header[8:16]).rstrip(b"\0").decode("ascii")


def decode_list(payloads: Sequence[Any], infos: bool = False) -> Any:
    """Arrays from chunk payloads (header, data, ...); with ``infos=True``, ``(arrays, infos)``."""
    if len(payloads) % 2:
        raise ValueError("tenbin buffer has a header without data")
    result, names = [], []
    for header, data in zip(payloads[::2], payloads[1::2], strict=False):
        shape, dtype, info = decode_header(header)
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize != len(data):
            needed = count * dtype.itemsize
            raise ValueError(f"tenbin data has {len(data)} bytes, shape {shape} of {dtype} needs {needed}")
        array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
        result.append(array.astype(dtype.newbyteorder("="), copy=False))
        names.append(info)
    return (result, names) if infos else result


def write_chunk(stream: IO[bytes], payload: bytes) -> None:
    """Write one chunk to a binary stream."""
    stream.write(_chunk(bytes(payload)))


def read_chunk(stream: IO[bytes]) -> bytes | None:
    """Read one chunk's payload from a binary stream; ``None`` at the end."""
    head = stream.read(16)
    if not head:
        return None
    if len(head) < 16 or head[:8] != MAGIC:
        raise ValueError("not a tenbin stream: bad magic or truncated chunk header")
    (n,) = struct.unpack("<q", head[8:])
    payload = stream.read(n)
    if len(payload) != n:
        raise ValueError("truncated tenbin stream")
    stream.read(_pad(n))
    return payload


def write(stream: IO[bytes], arrays: Sequence[np.ndarray], infos: Sequence[str] | None = None) -> None:
    """Write a list of arrays to a stream, chunk by chunk."""
    for payload in encode_list(arrays, infos):
        write_chunk(stream, payload)


def read(stream: IO[bytes], n: int = sys.maxsize, infos: bool = False) -> Any:
    """Read up to ``n`` arrays from a stream written by :func:`write`.

    >>> import io
    >>> f = io.BytesIO(); write(f, [np.arange(3)]); _ = f.seek(0)
    >>> read(f)[0].tolist()
    [0, 1, 2]
    """
    payloads: list[bytes] = []
    while len(payloads) < 2 * n:
        payload = read_chunk(stream)
        if payload is None:
            break
        payloads.append(payload)
    return decode_list(payloads, infos)


def save(fname: str, *arrays: np.ndarray, infos: Sequence[str] | None = None, nocheck: bool = False) -> None:
    """Save arrays to a file (``.ten`` by convention; ``nocheck=True`` allows other suffixes)."""
    if not nocheck and not fname.endswith(".ten"):
        raise ValueError(f"tenbin file name {fname!r} should end in .ten (pass nocheck=True to allow it)")
    with open(fname, "wb") as stream:
        write(stream, list(arrays), infos)


def load(fname: str, infos: bool = False, nocheck: bool = False) -> Any:
    """Load the arrays saved by :func:`save`."""
    if not nocheck and not fname.endswith(".ten"):
        raise ValueError(f"tenbin file name {fname!r} should end in .ten (pass nocheck=True to allow it)")
    with open(fname, "rb") as stream:
        return read(stream, infos=infos)

