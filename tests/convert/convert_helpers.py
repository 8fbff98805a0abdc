"""Helpers of the conversion tests: small real JPEG/PNG files made with Pillow."""

from __future__ import annotations

import io

import numpy as np
import PIL.Image


def image_bytes(i: int, fmt: str = "JPEG") -> bytes:
    out = io.BytesIO()
    PIL.Image.fromarray(np.full((8, 8, 3), (i * 37) % 256, np.uint8)).save(out, format=fmt)
    return out.getvalue()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, body: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def example(features: dict[str, bytes | int]) -> bytes:
    """A ``tf.train.Example`` (protobuf wire format) of single-value features: bytes -> bytes_list, int -> int64_list."""
    entries = b""
    for name, value in features.items():
        feature = _field(1, _field(1, value)) if isinstance(value, bytes) else _field(3, _field(1, _varint(value)))
        entries += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, entries)
