"""The one rule that turns a column (or a feature) of another format into a field of a WebDataset sample.

Fields are named so that the usual reading idioms work on the output (``.to_tuple("jpg", "cls")``):

- the table's one *media* column (a path column naming files, or image/audio bytes) is named by the value's
  extension alone: ``jpg``, ``png``, ``wav`` (:func:`field_names`; several media columns keep ``COLUMN.EXT``,
  and so do bytes without a known signature: ``data.bin``);
- the table's one *label* column (named ``label``, ``class``, ``target``, ``category``... or ending in
  ``_label``), when it holds an integer (or an integer's digits, as CSV does), is ``cls``;
- every other column keeps its name, with the extension of its kind: ``COLUMN.EXT`` (``caption.txt``,
  ``score.json``), or plain ``COLUMN`` when the name is already an extension (``jpg``, ``json``...).

``fields`` (``--fields`` on the command line) maps a column to the field name you want, over the defaults
(``{"image": "img.png", "label": "label.cls"}``). Bytes are kept exactly as they are, never re-encoded:

- bytes (and Hugging Face's image/audio structs ``{"bytes": ..., "path": ...}``): the original bytes; the
  extension comes from the struct's path, else from the bytes' signature (JPEG, PNG, GIF, WebP, TIFF, BMP,
  WAV, FLAC, MP3, Ogg, npy), else ``bin``. A struct with no bytes that names a file (:func:`external_path`,
  from ``load_dataset`` on local files) is never dropped: the table sources read the file, and
  :func:`column_field` given one raises :class:`~shardstream.errors.ConfigError` naming the column;
- str: UTF-8 text, ``txt``; bool and int: ``cls``; float, list, dict: ``json``; None: no field.

>>> names = field_names(["image", "label", "caption"], media=["image"])
>>> column_field("image", b"\\xff\\xd8\\xff\\xe0 rest of a JPEG", rename=names)
('jpg', b'\\xff\\xd8\\xff\\xe0 rest of a JPEG')
>>> column_field("label", 3, rename=names), column_field("caption", "a cat", rename=names)
(('cls', b'3'), ('caption.txt', b'a cat'))
>>> column_field("image", b"\\xff\\xd8\\xff\\xe0"), column_field("box", [1.5, 2])
(('image.jpg', b'\\xff\\xd8\\xff\\xe0'), ('box.json', b'[1.5, 2]'))
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
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..codecs import CODECS
from ..errors import ConfigError

__all__ = ["EXTENSION", "LABEL", "column_field", "column_values", "external_path", "field_names", "is_label",
           "safe_key", "sniff_extension"]

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


_AUDIO = ("bin", "mp3", "wav", "flac", "ogg")


@functools.lru_cache(maxsize=4096)
def _is_extension(name: str) -> bool:
    """Whether the column ``name`` is a field name already: an extension (``jpg``), or ``NAME.EXT`` (``caption.txt``,
    as shards written to Parquet name their columns)."""
    lowered = name.lower()
    if "." in lowered:
        return lowered.rsplit(".", 1)[-1] in CODECS or lowered.rsplit(".", 1)[-1] in _AUDIO
    return (lowered in CODECS and lowered not in _GENERIC) or lowered in _AUDIO


@functools.lru_cache(maxsize=4096)
def _plain_name(column: str, ext: str) -> str:
    return column if _is_extension(column) else f"{column}.{ext}"


#: in a field-name mapping (:func:`field_names`): name this column's field by the value's extension alone
EXTENSION = "<extension>"
#: in a field-name mapping: name this column's field ``cls`` when the value is an integer (else the usual rule)
LABEL = "<label>"
#: the words that name a label column (the last word of its name: ``label``, ``fine_label``, ``image/class/label``)
_LABEL_WORDS = frozenset({"label", "labels", "class", "cls", "target", "category"})
_INTEGER = re.compile(r"-?[0-9]+")


def is_label(column: str) -> bool:
    """Whether ``column`` is named as a sample's class is (its last word is ``label``, ``class``, ``target``...).

    >>> is_label("label"), is_label("image/class/label"), is_label("fine_label"), is_label("labelled")
    (True, True, True, False)
    """
    return re.split(r"[/_.\- ]", column.lower())[-1] in _LABEL_WORDS


def field_names(columns: Iterable[str], media: Iterable[str] = (),
                fields: Mapping[str, str] | None = None) -> dict[str, str]:
    """The field-name mapping of a table with ``columns`` (see the module docstring), for :func:`column_field`.

    ``media`` are the columns that hold files (path columns, image/audio bytes): the one media column is named
    by its extension (:data:`EXTENSION`), unless another column is already named as a field (``jpg``,
    ``json``...); the one label column is ``cls`` where it holds integers (:data:`LABEL`). ``fields`` (column ->
    field name) wins over both.

    >>> field_names(["image_path", "label", "caption"], media=["image_path"], fields={"caption": "txt"})
    {'image_path': '<extension>', 'label': '<label>', 'caption': 'txt'}
    >>> field_names(["image", "mask", "fine_label", "coarse_label"], media=["image", "mask"])
    {}
    """
    columns = [c for c in columns if c != "__key__"]
    files = [c for c in media if c in columns]
    labels = [c for c in columns if is_label(c)]
    names: dict[str, str] = {}
    if len(files) == 1 and not any(_is_extension(c) for c in columns if c != files[0] and c not in labels):
        names[files[0]] = EXTENSION
    if len(labels) == 1:
        names[labels[0]] = LABEL
    names.update(fields or {})
    return names


def _name(column: str, ext: str, rename: Mapping[str, str] | None) -> str:
    if rename:
        name = rename.get(column)
        if name == EXTENSION:
            return ext if ext != "bin" else _plain_name(column, ext)
        if name == LABEL:
            return "cls" if ext == "cls" else _plain_name(column, ext)
        if name is not None:
            return name
    return _plain_name(column, ext)


def _label_text(column: str, value: str, rename: Mapping[str, str] | None) -> bool:
    """Whether ``value`` is the digits of an integer in the label column (CSV holds every value as text)."""
    return rename is not None and rename.get(column) == LABEL and _INTEGER.fullmatch(value) is not None


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
        if _label_text(column, value, rename):
            return "cls", value.encode("ascii")
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
        return column_field(column, str(value), rename=rename)
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
        if rename and rename.get(column) == LABEL:
            if all(_INTEGER.fullmatch(value) for value in values):
                return "cls", [value.encode("ascii") for value in values]
            if any(_INTEGER.fullmatch(value) for value in values):
                return None  # some rows are cls, others txt: row by row
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
