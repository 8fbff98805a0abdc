"""The one rule that turns a column (or a feature) of another format into a field of a WebDataset sample.

A value becomes a field named ``COLUMN.EXT`` (``image.jpg``, ``label.cls``, ``caption.txt``), or plain
``COLUMN`` when the column's name is already an extension (``jpg``, ``cls``, ``json``...); ``rename`` maps a
column to the field name you want (``{"image": "jpg"}``). Bytes are kept exactly as they are, never re-encoded:

- bytes (and Hugging Face's image/audio structs ``{"bytes": ..., "path": ...}``): the original bytes; the
  extension comes from the struct's path, else from the bytes' signature (JPEG, PNG, GIF, WebP, TIFF, BMP,
  WAV, FLAC, MP3, Ogg, npy), else ``bin``. A struct with no bytes that names a file (:func:`external_path`,
  from ``load_dataset`` on local files) is never dropped: the table sources read the file, and
  :func:`column_field` given one raises :class:`~shardstream.errors.ConfigError` naming the column;
- str: UTF-8 text, ``txt``; bool and int: ``cls``; float, list, dict: ``json``; None: no field.

>>> column_field("image", b"\\xff\\xd8\\xff\\xe0 rest of a JPEG")
('image.jpg', b'\\xff\\xd8\\xff\\xe0 rest of a JPEG')
>>> column_field("label", 3), column_field("caption", "a cat"), column_field("box", [1.5, 2])
(('label.cls', b'3'), ('caption.txt', b'a cat'), ('box.json', b'[1.5, 2]'))
>>> column_field("image", {"bytes": b"\\x89PNG\\r\\n", "path": "cats/001.png"}, rename={"image": "png"})
('png', b'\\x89PNG\\r\\n')
>>> column_field("json", {"a": 1}), column_field("missing", None)
(('json', b'{"a": 1}'), None)
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from ..codecs import CODECS
from ..errors import ConfigError

__all__ = ["column_field", "column_values", "external_path", "safe_key", "sniff_extension"]

_SIGNATURES = (
    (b"\xff\xd8\xff", "jpg"), (b"\x89PNG\r\n\x1a\n", "png"), (b"\x89PNG", "png"), (b"GIF87a", "gif"),
    (b"GIF89a", "gif"), (b"II*\x00", "tif"), (b"MM\x00*", "tif"), (b"BM", "bmp"), (b"fLaC", "flac"),
    (b"ID3", "mp3"), (b"OggS", "ogg"), (b"\x93NUMPY", "npy"), (b"\x1f\x8b", "gz"),
)  # fmt: skip


def sniff_extension(data: bytes | bytearray | memoryview) -> str:
    """The extension that the bytes' signature gives (``jpg``, ``png``, ``webp``...), or ``bin``."""
    head = bytes(data[:16])
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"WAVE"):
        return "webp" if head[8:12] == b"WEBP" else "wav"
    return next((ext for magic, ext in _SIGNATURES if head.startswith(magic)), "bin")


def safe_key(key: str) -> str:
    """A key that reads back as itself: dots in its last path part become ``_`` (the first dot of a member's
    name starts its extension), and characters a member name cannot hold (NUL, backslash) too.

    >>> safe_key("img.0001"), safe_key("train/cat.7")
    ('img_0001', 'train/cat_7')
    """
    if "." not in key and "\\" not in key and "\0" not in key and key[:1] != "/" and key[-1:] not in ("/", ""):
        return key
    head, _, tail = key.rpartition("/")
    key = (head + "/" if head else "") + tail.replace(".", "_")
    return key.replace("\0", "_").replace("\\", "_").strip("/") or "_"


#: codec names that are also common column names of other kinds of data: they get an extension of their own
_GENERIC = {"image", "img", "id", "index", "count", "class"}


@functools.lru_cache(maxsize=4096)
def _is_extension(name: str) -> bool:
    return (name.lower() in CODECS and name.lower() not in _GENERIC) or name.lower().rsplit(".", 1)[-1] in ("bin", "mp3", "wav", "flac", "ogg")


@functools.lru_cache(maxsize=4096)
def _plain_name(column: str, ext: str) -> str:
    return column if _is_extension(column) else f"{column}.{ext}"


def _name(column: str, ext: str, rename: Mapping[str, str] | None) -> str:
    if rename and column in rename:
        return rename[column]
    return _plain_name(column, ext)


def _json(value: Any) -> bytes:
    def clean(v: Any) -> Any:  # JSON has no NaN: write null, as pandas does
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, (bytes, bytearray)):
            return v.decode("utf-8", "replace")
        if isinstance(v, Mapping):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v if isinstance(v, (str, int, float, bool, type(None))) else str(v)

    return json.dumps(clean(value), ensure_ascii=False).encode("utf-8")


_SCALARS = frozenset({str, bytes, int, float, bool, type(None)})


def _is_media(value: Any) -> bool:
    """Whether ``value`` is a Hugging Face image/audio struct (``{"bytes": ..., "path": ...}``)."""
    return isinstance(value, Mapping) and "bytes" in value and set(value) <= {"bytes", "path", "sampling_rate"}


def external_path(value: Any) -> str | None:
    """The file an image/audio struct names when it holds no bytes (what ``datasets.load_dataset`` on local files
    stores: ``{"bytes": None, "path": "/data/cat/1.png"}``), else None; its bytes must be read from there.

    >>> external_path({"bytes": None, "path": "cat/1.png"}), external_path({"bytes": b"x", "path": "cat/1.png"})
    ('cat/1.png', None)
    """
    if value.__class__ in _SCALARS or not _is_media(value) or value.get("bytes") is not None:
        return None
    path = value.get("path")
    return path if isinstance(path, str) and path else None


def column_field(column: str, value: Any, *, rename: Mapping[str, str] | None = None) -> tuple[str, bytes] | None:
    """``(field name, bytes)`` for the value of ``column`` (see the module docstring); None for a missing value."""
    if value is None:
        return None
    kind = type(value)
    if kind is str:
        return _name(column, "txt", rename), value.encode("utf-8")
    if kind is int or kind is bool:
        return _name(column, "cls", rename), str(int(value)).encode("ascii")
    if kind is bytes:
        return _name(column, sniff_extension(value), rename), value
    if _is_media(value):
        data, path = value.get("bytes"), value.get("path")
        if data is None:
            if path:
                raise ConfigError(f"column {column!r} holds no bytes but names the file {path!r}: read it first "
                                  "(the table sources do: external_path)")  # fmt: skip
            return None
        ext = os.path.splitext(path)[1][1:].lower() if isinstance(path, str) and "." in path else ""
        return _name(column, ext or sniff_extension(data), rename), bytes(data)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _name(column, sniff_extension(value), rename), bytes(value)
    if isinstance(value, str):
        return _name(column, "txt", rename), value.encode("utf-8")
    if isinstance(value, (bool, int)) and not hasattr(value, "shape"):
        return _name(column, "cls", rename), str(int(value)).encode("ascii")
    return _name(column, "json", rename), _json(value)


def column_values(column: str, values: list[Any], rename: Mapping[str, str] | None = None) -> tuple[str, list[Any]] | None:
    """The field name and data that :func:`column_field` gives every value of a column, when they all give the
    same name (str values are left for the writer to encode as UTF-8); else None (convert value by value).

    >>> column_values("label", [3, True]), column_values("caption", ["a", None])
    (('label.cls', [b'3', b'1']), None)
    """
    kinds = set(map(type, values))
    if not kinds:
        return None
    if kinds == {str}:
        return _name(column, "txt", rename), values  # the writer encodes str as UTF-8, as column_field does
    if kinds <= {int, bool}:
        return _name(column, "cls", rename), [b"%d" % value for value in values]
    if kinds == {float}:
        return _name(column, "json", rename), list(map(_json, values))
    if kinds == {bytes}:
        extensions = set(map(sniff_extension, values))
        if len(extensions) == 1:
            return _name(column, extensions.pop(), rename), values
    return None
