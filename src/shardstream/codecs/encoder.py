"""Encoding samples for writing: :func:`encode_sample` and :func:`encode_field`, over the same table as decoding.

Rules, in order:

1. ``bytes``/``bytearray``/``memoryview`` are written exactly as given, never re-encoded (re-encoding JPEGs
   silently is how a 202 GB dataset became 474 GB). Under a ``.gz`` extension, bytes that are not already
   gzip data are gzipped (as webdataset does); bytes that are (they start with the gzip magic) are kept.
2. ``str`` becomes UTF-8 for every extension (then gzipped under ``.gz``).
3. Anything else is encoded by the table entry for the extension (full extension, then its last
   component): ints for ``cls``, dicts for ``json``, arrays for ``npy``/``png``, tensors for ``pth``...
   ``x.json.gz`` encodes JSON, then gzips with ``mtime=0``. The same value always gives the same bytes.

A value the extension cannot hold raises :class:`~shardstream.errors.EncodeError` naming the sample key and
the field; the error has ``key`` and ``field`` attributes.

>>> encode_sample({"__key__": "a", "cls": 3, "json": {"x": 1}, "txt": "hé", "jpg": b"\\xff\\xd8raw"})
{'cls': b'3', 'json': b'{"x": 1}', 'txt': b'h\\xc3\\xa9', 'jpg': b'\\xff\\xd8raw'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import EncodeError, MissingDependencyError
from .table import lookup, match_extension

__all__ = ["encode_field", "encode_sample"]

_BYTES_LIKE = (bytes, bytearray, memoryview)
_GZIP_MAGIC = b"\x1f\x8b"

Encoder = bool | None | Callable[[dict], dict] | Mapping[str, Callable[[Any], bytes]]


class _Refused(Exception):
    """Internal: the value cannot be encoded for the extension (message says why)."""


def _encode(field: str, value: Any, quality: int | None, custom: Mapping[str, Callable[[Any], bytes]]) -> bytes:
    found = lookup(field)
    if found is not None and found[1].kind == "wrapper":
        ext, codec = found
        if isinstance(value, _BYTES_LIKE) and bytes(value[:2]) == _GZIP_MAGIC:
            return bytes(value)
        assert codec.encode is not None  # a wrapper (gz) encodes as well as decodes
        return codec.encode(_encode(field[: -len(ext) - 1], value, quality, custom))
    if isinstance(value, _BYTES_LIKE):
        return value if value.__class__ is bytes else bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if custom:
        custom_found = match_extension(field, custom)
        if custom_found is not None:
            return _as_bytes(custom_found[1](value))
    if found is None:
        raise _Refused(
            f"no encoder for a {type(value).__name__} under extension {field!r}; give bytes or str, use a known "
            "extension (json, npy, png, ...), or pass a custom encoder"
        )
    ext, codec = found
    if codec.encode is None:
        raise _Refused(f"cannot write .{ext} ({codec.name}); give the encoded bytes instead")
    if codec.kind == "image":
        return codec.encode(value, quality=quality)  # type: ignore[call-arg]  # an image codec's encode takes quality
    return codec.encode(value)


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, _BYTES_LIKE):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    raise _Refused(f"the encoder returned a {type(data).__name__}, not bytes")


def encode_field(field: str, value: Any, *, jpeg_quality: int | None = None) -> bytes:
    """Encode one value for the extension ``field`` (``"jpg"``, ``"seg.png"``, ``"json.gz"``).

    >>> encode_field("cls", 7), encode_field("jpg", b"already-encoded")
    (b'7', b'already-encoded')
    """
    return encode_sample({field: value}, jpeg_quality=jpeg_quality)[field]


def encode_sample(
    sample: Mapping[str, Any], *, encoder: Encoder = True, jpeg_quality: int | None = None
) -> dict[str, bytes]:
    """Encode a sample to ``{extension: bytes}`` for writing; ``__key__`` and other ``__*`` fields are dropped.

    ``encoder=True``: the table (rules in the module docstring). ``encoder=False``: values must already be
    ``bytes`` or ``str`` (``str`` becomes UTF-8), nothing else is touched. ``encoder=callable``: called on the
    sample, must return a dict of ``bytes``/``str``. ``encoder={ext: fn}``: ``fn(value) -> bytes`` for those
    extensions, the table for the others. ``jpeg_quality``: for JPEG written from arrays/images (default 100,
    as webdataset). Field names are kept as given.

    >>> encode_sample({"__key__": "k", "txt": "a"}, encoder=False)
    {'txt': b'a'}
    >>> encode_sample({"__key__": "k", "cls": 1}, encoder=False)
    Traceback (most recent call last):
    ...
    shardstream.errors.EncodeError: cannot encode field 'cls' of sample 'k': encoder=False needs bytes or str ...
    """
    key = sample.get("__key__")
    custom: Mapping[str, Callable[[Any], bytes]] = {}
    if encoder is True:
        pass
    elif encoder is False or encoder is None:
        why = "encoder=False needs bytes or str values"
        return {field: _raw(key, field, value, why) for field, value in sample.items() if field[:2] != "__"}
    elif isinstance(encoder, Mapping):
        custom = {k.lower().lstrip("."): v for k, v in encoder.items()}
    elif callable(encoder):
        encoded = encoder(dict(sample))
        if not isinstance(encoded, Mapping):
            raise EncodeError(f"the custom encoder returned a {type(encoded).__name__}, not a dict (sample {key!r})")
        why = "the custom encoder must return bytes or str values"
        return {field: _raw(key, field, value, why) for field, value in encoded.items() if field[:2] != "__"}
    else:
        raise EncodeError(f"encoder must be True, False, a callable or a dict of ext -> function, not {encoder!r}")
    result = {}
    for field, value in sample.items():
        if field[:2] == "__":
            continue
        if value.__class__ is bytes and field[-2:].lower() != "gz":
            result[field] = value  # the common case when writing already-encoded data
            continue
        try:
            result[field] = _encode(field, value, jpeg_quality, custom)
        except MissingDependencyError:
            raise
        except Exception as e:
            detail = str(e) if isinstance(e, _Refused) else f"{type(e).__name__}: {e}"
            raise _error(key, field, detail) from (None if isinstance(e, _Refused) else e)
    return result


def _raw(key: Any, field: str, value: Any, why: str) -> bytes:
    try:
        return _as_bytes(value)
    except _Refused:
        raise _error(key, field, f"{why}, got {type(value).__name__}") from None


def _error(key: Any, field: str, detail: str) -> EncodeError:
    if len(detail) > 300:
        detail = detail[:300] + "..."
    where = f"field {field!r}" + (f" of sample {key!r}" if key is not None else "")
    error = EncodeError(f"cannot encode {where}: {detail}")
    error.key, error.field = key, field
    return error
