"""webdataset's ``tenbin`` module: the ``.ten`` tensor binary format (implemented in
:mod:`shardstream.codecs.tenbin`), with webdataset's helper names.

>>> import io, numpy as np
>>> stream = io.BytesIO()
>>> write(stream, [np.arange(4, dtype="int32")], infos=["ids"])
>>> _ = stream.seek(0)
>>> arrays, infos = read(stream, infos=True)
>>> arrays[0].tolist(), infos
([0, 1, 2, 3], ['ids'])
>>> decode_buffer(encode_buffer([np.zeros(2, "float32")]))[0].tolist()
[0.0, 0.0]
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from .codecs.tenbin import (
    _CODES,
    MAGIC,
    decode_buffer,
    decode_chunks,
    decode_header,
    decode_list,
    encode_buffer,
    encode_chunks,
    encode_header,
    encode_list,
    load,
    read,
    read_chunk,
    save,
    write,
    write_chunk,
)

__all__ = [
    "bytedata", "bytelen", "check_acceptable_input_type", "check_infos", "decode_buffer", "decode_chunks",
    "decode_header", "decode_list", "encode_buffer", "encode_chunks", "encode_header", "encode_list", "load",
    "long_to_short", "magic", "magic_bytes", "magic_str", "read", "read_chunk", "roundup", "save", "short_to_long",
    "str64", "unstr64", "write", "write_chunk",
]

#: dtype name -> tenbin code (``"float32" -> "f4"``), and back
long_to_short = {name: code.decode("ascii") for name, code in _CODES.items()}
short_to_long = {code: name for name, code in long_to_short.items()}
magic_str = MAGIC.decode("ascii")
magic_bytes = MAGIC


def str64(s: str) -> int:
    """An ASCII string of at most 8 characters as one int64 word (little-endian), as tenbin headers store it."""
    return struct.unpack("<q", s.encode("ascii").ljust(8, b"\0"))[0]


def unstr64(i: int) -> str:
    """The inverse of :func:`str64`.

    >>> unstr64(str64("f4"))
    'f4'
    """
    return struct.pack("<q", i).decode("ascii").rstrip("\0")


magic = str64(magic_str)


def bytelen(a: Any) -> int:
    """The length in bytes of an array or bytes-like value."""
    return a.nbytes if hasattr(a, "nbytes") else len(a)


def bytedata(a: Any) -> Any:
    """The bytes of an array (C order), or a bytes-like value as it is."""
    if isinstance(a, (bytes, bytearray, memoryview)):
        return a
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a).tobytes()
    raise ValueError(f"tenbin: {type(a).__name__} is neither an array nor bytes")


def check_acceptable_input_type(data: Sequence[np.ndarray], allow64: bool) -> None:
    """Raise ValueError for an array tenbin cannot store (or a 64-bit one unless ``allow64``)."""
    for a in data:
        if a.dtype.name not in long_to_short:
            raise ValueError(f"tenbin cannot store dtype {a.dtype}")
        if not allow64 and a.dtype.itemsize == 8:
            raise ValueError(f"64-bit dtype {a.dtype} is not allowed unless allow64=True")


def check_infos(data: Any, infos: Sequence[str], required_infos: Any = None) -> Any:
    """``data``; ``(data, infos)`` when ``required_infos is True``; a list/tuple checks the infos match it."""
    if required_infos is None or required_infos is False:
        return data
    if required_infos is True:
        return data, infos
    if not isinstance(required_infos, (tuple, list)):
        raise ValueError("required_infos must be a tuple or a list")
    for required, actual in zip(required_infos, infos, strict=False):
        if required != actual:
            raise ValueError(f"tenbin info {actual!r} does not match the required {required!r}")
    return data


def roundup(n: int, k: int = 64) -> int:
    """``n`` rounded up to a multiple of ``k``."""
    return k * ((n + k - 1) // k)
