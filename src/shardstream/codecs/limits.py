"""Limits on what one field may decode to: bytes after inflating, pixels of an image. Checked before allocating.

A small field can inflate enormously: a 2 MB ``.json.gz`` to gigabytes of zeros, a 2 MB ``.npz`` to a 2 GB
array, a 400 KB PNG or a 70-byte WebP to hundreds of megabytes of pixels. Every decoder that inflates asks here
first, with the size it is about to produce (a running total while gunzipping, the declared size of an ``.npz``
member or ``.npy`` shape, the width and height in an image header), and a size past the limit raises
:class:`~shardstream.errors.DecodeLimitError` (the decoder adds the shard, key and field).

The limits are ``SHARDSTREAM_MAX_DECODED_BYTES`` (default 1 GiB per field) and ``SHARDSTREAM_MAX_IMAGE_PIXELS``
(default 100 million: 10,000 x 10,000), raised through the settings or with the ``max_size=`` / ``max_pixels=``
argument of the codec function. Reading the settings costs more than decoding a small field, so they are consulted
only above :data:`FREE_BYTES` / :data:`FREE_PIXELS`: a setting below those acts as them (an explicit argument
is always exact). Pillow refuses images over ``2 * PIL.Image.MAX_IMAGE_PIXELS`` (179 million) on its own; that
refusal is a ``DecodeLimitError`` too.

>>> check_bytes(1 << 20, "gunzipped data")  # small: no settings read
>>> check_bytes(5000, "gunzipped data", limit=4096)
Traceback (most recent call last):
...
shardstream.errors.DecodeLimitError: gunzipped data would be 5000 bytes, which exceeds the limit of 4096 ...
>>> bounded_gunzip(__import__("gzip").compress(b"abc" * 3))
b'abcabcabc'
"""

from __future__ import annotations

import zlib

from ..config import get_settings
from ..errors import DecodeLimitError

__all__ = ["FREE_BYTES", "FREE_PIXELS", "bounded_gunzip", "byte_limit", "check_bytes", "check_pixels"]

#: Sizes up to which a field is never checked against the settings (the limits cannot be set below these).
FREE_BYTES = 16 << 20
FREE_PIXELS = 1 << 22
_STEP = 4 << 20  # gunzip output per step: the most a bomb allocates past the limit


def byte_limit(size: int, limit: int | None = None) -> int | None:
    """The byte limit that applies to ``size`` bytes: ``limit`` when given; else None up to :data:`FREE_BYTES`,
    the setting above that."""
    if limit is not None:
        return limit
    if size <= FREE_BYTES:
        return None
    return max(FREE_BYTES, get_settings().max_decoded_bytes)


def check_bytes(size: int, what: str, limit: int | None = None) -> None:
    """Raise :class:`~shardstream.errors.DecodeLimitError` if ``what`` would be ``size`` bytes, over the limit."""
    applies = byte_limit(size, limit)
    if applies is not None and size > applies:
        raise DecodeLimitError(
            f"{what} would be {size} bytes, which exceeds the limit of {applies} (a decompression bomb?); if the "
            "data is trusted, raise SHARDSTREAM_MAX_DECODED_BYTES or pass max_size= to the codec function"
        )


def check_pixels(width: int, height: int, what: str = "image", max_pixels: int | None = None) -> None:
    """Raise :class:`~shardstream.errors.DecodeLimitError` if a ``width`` x ``height`` image is over the limit.

    >>> check_pixels(100_000, 100_000, "png image", max_pixels=10**9)
    Traceback (most recent call last):
    ...
    shardstream.errors.DecodeLimitError: png image is 100000 x 100000 pixels, which exceeds the limit of 1000000000 ...
    """
    pixels = width * height
    if max_pixels is None:
        if pixels <= FREE_PIXELS:
            return
        max_pixels = max(FREE_PIXELS, get_settings().max_image_pixels)
    if pixels > max_pixels:
        raise DecodeLimitError(
            f"{what} is {width} x {height} pixels, which exceeds the limit of {max_pixels} (a decompression bomb?); if "
            "the data is trusted, raise SHARDSTREAM_MAX_IMAGE_PIXELS or pass max_pixels= to decode_image"
        )


def bounded_gunzip(data: bytes | bytearray | memoryview, limit: int | None = None) -> bytes:
    """Gunzip ``data`` (one or more gzip members, trailing zero padding allowed, like :func:`gzip.decompress`),
    never producing more than the byte limit plus one step (4 MiB)."""
    parts: list[bytes] = []
    total, applies = 0, limit
    rest = bytes(data)
    while rest:
        inflater = zlib.decompressobj(wbits=31)  # gzip header and trailer (CRC and length checked)
        pending = rest
        while not inflater.eof:
            chunk = inflater.decompress(pending, _STEP)
            pending = inflater.unconsumed_tail
            if chunk:
                total += len(chunk)
                if total > FREE_BYTES or applies is not None:
                    applies = byte_limit(total, applies)
                    check_bytes(total, "gunzipped data", applies)
                parts.append(chunk)
            elif not pending and not inflater.eof:
                raise EOFError("compressed data ended before the end-of-stream marker was reached")
        rest = inflater.unused_data.lstrip(b"\0")
    return parts[0] if len(parts) == 1 else b"".join(parts)
