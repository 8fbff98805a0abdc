"""How the viewer shows a field: a JSON description by extension, images, array renderings and thumbnails.

:func:`describe_field` turns one field's bytes into what the page shows: ``{"ext", "size", "kind", ...}`` with
``kind`` one of ``image``, ``audio``, ``video``, ``text``, ``json``, ``label``, ``array``, ``unsafe``, ``binary``
or ``error``. Decoding uses the codec table (:mod:`shardstream.codecs`), with two rules of its own: unsafe
codecs (pickle) are never run, and nothing raises: a field that does not decode is shown as hex with the error.

>>> describe_field("cls", b"1", classes=["cat", "dog"])
{'ext': 'cls', 'size': 1, 'kind': 'label', 'value': 1, 'name': 'dog'}
>>> describe_field("json", b'{"a": [1, 2]}')["text"]
'{\\n  "a": [\\n    1,\\n    2\\n  ]\\n}'
>>> d = describe_field("pyd", b"\\x80\\x04K\\x01.")
>>> d["kind"], d["note"]
('unsafe', 'unsafe: not decoded (decoding .pyd can run code)')
>>> d = describe_field("json", b"{oops")
>>> d["kind"], d["error"][:11], d["hex"][:15]
('error', 'DecodeError', '00000000  7b 6f')
"""

from __future__ import annotations

import io
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import numpy.lib.format as npformat
import PIL.Image

from ..codecs import decode_field, get_codec
from ..codecs.basic import gzip_loads
from ..codecs.images import open_image
from ..codecs.table import lookup, match_extension

__all__ = [
    "AUDIO_TYPES",
    "IMAGE_TYPES",
    "MAX_DECODE",
    "Thumbnails",
    "VIDEO_TYPES",
    "array_image",
    "arrays_of",
    "bytes_to_describe",
    "describe_field",
    "hexdump",
    "media_type",
    "npy_renderable",
    "png_bytes",
    "rendered_image",
    "thumbnail",
    "unwrap",
]

#: image formats browsers show as they are (others are converted to PNG); extension -> content type
IMAGE_TYPES = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg", "jfif": "image/jpeg",
               "png": "image/png", "apng": "image/apng", "gif": "image/gif", "webp": "image/webp",
               "bmp": "image/bmp", "ico": "image/x-icon"}  # fmt: skip
AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg", "flac": "audio/flac", "ogg": "audio/ogg",
               "oga": "audio/ogg", "opus": "audio/ogg", "m4a": "audio/mp4", "weba": "audio/webm"}  # fmt: skip
VIDEO_TYPES = {"mp4": "video/mp4", "m4v": "video/mp4", "webm": "video/webm", "ogv": "video/ogg"}
_MEDIA_TYPES = {**IMAGE_TYPES, **AUDIO_TYPES, **VIDEO_TYPES}
MAX_DECODE = 64 << 20  # bytes: larger fields (and larger gunzipped data) are not decoded
MAX_TEXT = 200_000  # characters of text shown
THUMB_SIZE = 192  # pixels, the longer side of a thumbnail
_HEX_BYTES = 512


def hexdump(data: bytes, limit: int = _HEX_BYTES) -> str:
    """The first ``limit`` bytes as ``offset  hex  |ascii|`` lines (and how many more there are).

    >>> hexdump(b"ab\\x00")
    '00000000  61 62 00                                          |ab.|'
    """
    lines = []
    for start in range(0, min(len(data), limit), 16):
        row = data[start : start + 16]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{start:08x}  {' '.join(f'{b:02x}' for b in row):<48}  |{text}|")
    if len(data) > limit:
        lines.append(f"... {len(data) - limit} more bytes")
    return "\n".join(lines)


def unwrap(ext: str, data: bytes) -> tuple[str, bytes]:
    """``(inner extension, bytes)`` with ``.gz`` layers removed (``x.json.gz`` -> ``x.json``), at most
    :data:`MAX_DECODE` bytes out of each (a gzip bomb raises ``ValueError``)."""
    while ext == "gz" or ext.endswith(".gz"):
        data, ext = gzip_loads(data, max_size=MAX_DECODE), ext[:-3].rstrip(".")
    return ext, data


def media_type(ext: str) -> str | None:
    """The content type a browser can show a field with (images, audio, video by extension), or None."""
    found = match_extension(ext, _MEDIA_TYPES)
    return found[1] if found is not None else None


def arrays_of(value: Any) -> list[tuple[str | None, np.ndarray]] | None:
    """The arrays in a decoded value (an array, a dict or list of them), or None when it is something else."""
    if isinstance(value, np.ndarray):
        return [(None, value)]
    if type(value).__module__.startswith("torch") and hasattr(value, "numpy"):
        return [(None, value.detach().cpu().numpy())]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    found: list[tuple[str | None, np.ndarray]] = [(str(k), v) for k, v in items if isinstance(v, np.ndarray)]
    return found if found and len(found) == len(value) else None


def array_image(array: np.ndarray) -> np.ndarray | None:
    """An 8-bit image (HxW, HxWx3 or HxWx4) for a 2-D or 3-D numeric array, or None when it is not one.

    uint8 is shown as it is; floats in [0, 1] are scaled by 255; other values are stretched from min to max.

    >>> array_image(np.zeros((3, 2, 4), np.float32)).shape, array_image(np.ones((3, 8, 8))).shape
    ((3, 2, 4), (8, 8, 3))
    """
    a = np.squeeze(array) if array.ndim > 3 else array
    if a.ndim == 3 and a.shape[-1] not in (1, 3, 4) and a.shape[0] in (1, 3, 4):
        a = np.moveaxis(a, 0, -1)  # CHW -> HWC
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[-1] not in (3, 4)) or 0 in a.shape or a.size > 50_000_000:
        return None
    if a.dtype == np.uint8:
        return a
    if a.dtype == bool:
        return a.astype(np.uint8) * 255
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        return None
    a = np.nan_to_num(a.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    lo, hi = float(a.min()), float(a.max())
    if not (np.issubdtype(array.dtype, np.floating) and lo >= 0 and hi <= 1):
        a = (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)
    return np.clip(np.round(a * 255), 0, 255).astype(np.uint8)


def npy_renderable(head: bytes) -> bool:
    """Whether a ``.npy`` field (its first bytes suffice) holds an array :func:`array_image` can show."""
    try:
        f = io.BytesIO(head)
        version = npformat.read_magic(f)
        reader = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
        shape, _, dtype = reader(f)  # the header only
    except Exception:
        return False
    dims = [n for n in shape if n != 1] if len(shape) > 3 else list(shape)
    return dtype.kind in "buif" and len(dims) in (2, 3) and (len(dims) == 2 or 1 in (dims[0], dims[-1]) or
                                                             dims[-1] in (3, 4) or dims[0] in (3, 4))


def png_bytes(image: Any) -> bytes:
    """A PIL image or 8-bit array as PNG bytes."""
    if isinstance(image, np.ndarray):
        image = PIL.Image.fromarray(image)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _pil(ext: str, data: bytes) -> Any:
    """The field as a PIL image: image files, or arrays (``.npy`` and friends) rendered by :func:`array_image`."""
    ext, data = unwrap(ext, data)
    if get_codec(ext) is not None and get_codec(ext).kind == "image":  # type: ignore[union-attr]
        return open_image(data)  # over SHARDSTREAM_MAX_IMAGE_PIXELS: DecodeLimitError, nothing decoded
    found = arrays_of(decode_field(ext, data))
    pixels = array_image(found[0][1]) if found else None
    if pixels is None:
        raise ValueError(f"field {ext!r} is not an image or a 2-D/3-D array")
    return PIL.Image.fromarray(pixels)


def thumbnail(ext: str, data: bytes, size: int = THUMB_SIZE) -> tuple[bytes, str]:
    """``(bytes, content type)`` of a thumbnail (longer side ``size``) of an image or array field: JPEG, or PNG
    for images with transparency."""
    image = _pil(ext, data)
    if getattr(image, "format", None) == "JPEG":
        image.draft("RGB", (size, size))  # decode at a reduced scale: fast on large JPEGs
    image.thumbnail((size, size))
    alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
    image = image.convert("RGBA" if alpha else "RGB")
    out = io.BytesIO()
    image.save(out, format="PNG" if alpha else "JPEG", quality=85)
    return out.getvalue(), "image/png" if alpha else "image/jpeg"


def rendered_image(ext: str, data: bytes, array: str | None = None) -> bytes:
    """A PNG of an image field in a format browsers do not show, or of one array of an array field."""
    ext, data = unwrap(ext, data)
    if array is None:
        return png_bytes(_pil(ext, data).convert("RGBA"))
    found = dict(arrays_of(decode_field(ext, data)) or ())
    pixels = array_image(found[array]) if array in found else None
    if pixels is None:
        raise KeyError(array)
    return png_bytes(pixels)


def _json_text(value: Any) -> str:
    def default(o: Any) -> Any:
        if isinstance(o, (bytes, bytearray, memoryview)):
            return f"<{len(o)} bytes: {bytes(o)[:64]!r}{'...' if len(o) > 64 else ''}>"
        if isinstance(o, np.ndarray):
            return o.tolist() if o.size <= 1000 else f"<array shape={list(o.shape)} dtype={o.dtype}>"
        if isinstance(o, np.generic):
            return o.item()
        return repr(o)

    return json.dumps(value, indent=2, ensure_ascii=False, default=default)


def _describe_array(name: str | None, a: np.ndarray) -> dict[str, Any]:
    with np.printoptions(threshold=64, edgeitems=3, linewidth=100, precision=4):
        lines = str(a).splitlines()
    preview = "\n".join(lines[:16] + ([f"... ({len(lines) - 16} more lines)"] if len(lines) > 16 else []))
    return {"name": name, "shape": list(a.shape), "dtype": str(a.dtype), "preview": preview,
            "image": array_image(a) is not None}  # fmt: skip


def bytes_to_describe(ext: str, size: int) -> int:
    """How many bytes of a field :func:`describe_field` needs: the first MiB of a file browsers show (JPEG, PNG,
    audio, video...: their headers come first), else the whole field up to :data:`MAX_DECODE` (and a byte more,
    to see it is larger).

    >>> bytes_to_describe("jpg", 50 << 20), bytes_to_describe("tiff", 50 << 20) == 50 << 20
    (1048576, True)
    """
    if media_type(ext) is not None:
        return min(size, 1 << 20)
    return min(size, MAX_DECODE + 1)


def describe_field(ext: str, data: bytes, *, classes: list[str] | None = None, size: int | None = None
                   ) -> dict[str, Any]:  # fmt: skip
    """What the page shows for one field (see the module docstring); never raises. ``size``: the field's full
    size when ``data`` is only its beginning (a field over :data:`MAX_DECODE` bytes is not decoded)."""
    out: dict[str, Any] = {"ext": ext, "size": len(data) if size is None else size}
    try:
        out.update(_describe(ext, data, classes, out["size"]))
    except Exception as e:
        out.update(kind="error", error=f"{type(e).__name__}: {' '.join(str(e).split())}", hex=hexdump(data))
    return out


def _describe(ext: str, data: bytes, classes: list[str] | None, size: int) -> dict[str, Any]:
    inner, plain = unwrap(ext, data) if size <= MAX_DECODE else (ext, data)
    mime = media_type(inner)
    codec = get_codec(inner)
    if mime is not None and mime.startswith(("audio/", "video/")):
        return {"kind": mime.partition("/")[0], "mime": mime}
    if codec is not None and codec.kind == "image":
        with PIL.Image.open(io.BytesIO(plain)) as image:  # reads the header only
            width, height, mode, fmt = image.width, image.height, image.mode, image.format
        return {"kind": "image", "width": width, "height": height, "mode": mode, "format": fmt,
                "native": mime is not None}  # fmt: skip
    if size > MAX_DECODE:
        return {"kind": "binary", "note": f"not decoded: larger than {MAX_DECODE} bytes", "hex": hexdump(data)}
    if codec is None or codec.decode is None:
        try:
            text = plain.decode("utf-8")
        except UnicodeDecodeError:
            return {"kind": "binary", "note": "no codec for this extension", "hex": hexdump(plain)}
        if any(ord(c) < 32 and c not in "\t\n\r" for c in text[:4096]):
            return {"kind": "binary", "note": "no codec for this extension", "hex": hexdump(plain)}
        return {"kind": "text", "text": text[:MAX_TEXT], "truncated": len(text) > MAX_TEXT,
                "note": "no codec for this extension: shown as UTF-8 text"}  # fmt: skip
    if not codec.safe:
        last = lookup(inner)[0]  # type: ignore[index]
        return {"kind": "unsafe", "note": f"unsafe: not decoded (decoding .{last} can run code)", "hex": hexdump(plain)}
    value = decode_field(inner, plain)
    if codec.name == "text":
        return {"kind": "text", "text": value[:MAX_TEXT], "truncated": len(value) > MAX_TEXT}
    if codec.name == "int":
        name = classes[value] if classes and inner in ("cls", "class") and 0 <= value < len(classes) else None
        return {"kind": "label", "value": value, "name": name}
    found = arrays_of(value)
    if found is not None:
        return {"kind": "array", "arrays": [_describe_array(name, a) for name, a in found]}
    text = _json_text(value)
    return {"kind": "json", "text": text[:MAX_TEXT], "truncated": len(text) > MAX_TEXT}


class Thumbnails:
    """A thread-safe LRU cache of generated images, bounded in bytes; failures are cached too (as None).

    >>> cache = Thumbnails(max_bytes=10)
    >>> cache.get("a", lambda: (b"12345678", "image/png")), cache.get("a", lambda: 1 / 0)
    ((b'12345678', 'image/png'), (b'12345678', 'image/png'))
    >>> _ = cache.get("b", lambda: (b"123", "image/png")); "a" in cache, len(cache)
    (False, 1)
    """

    def __init__(self, max_bytes: int = 64 << 20):
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[bytes, str] | None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], tuple[bytes, str]]) -> tuple[bytes, str] | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        try:
            value: tuple[bytes, str] | None = make()
        except Exception:
            value = None
        with self._lock:
            if key not in self._items:
                self._items[key] = value
                self._bytes += len(value[0]) if value else 0
            while self._bytes > self.max_bytes and self._items:
                old = self._items.popitem(last=False)[1]
                self._bytes -= len(old[0]) if old else 0
        return value

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)
