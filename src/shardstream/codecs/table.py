"""THE codec table: extension -> :class:`Codec` (decode, encode, safe). Reader and writer both use it.

Each :class:`Codec` holds the decode function (``bytes -> value``), the encode function (``value -> bytes``)
and whether decoding is *safe* on untrusted data. Extensions are matched on the full extension first
(``seg.jpg``), then on its last dot-component (``jpg``), case-insensitively; :func:`lookup` does this for
both directions. Three kinds of codecs:

- ``"data"``: decoded by the table as soon as a field has this extension (``txt``, ``json``, ``npy``...);
- ``"image"``: decoded only when an image spec is given (``Decoder("rgb")``), as in webdataset, where
  ``.decode()`` without a spec leaves images as bytes; ``Codec.decode`` gives a ``PIL.Image``;
- ``"wrapper"``: ``gz``; decoding unwraps and goes on with the inner extension (``x.json.gz`` -> json),
  encoding encodes by the inner extension, then gzips (deterministically).

>>> get_codec("cls").decode(b"3"), get_codec("cls").encode(3)
(3, b'3')
>>> get_codec("seg.JPG").kind, get_codec("pyd").safe, get_codec("unknown") is None
('image', False, True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from . import arrays, basic, images

__all__ = ["CODECS", "Codec", "get_codec", "lookup", "match_extension"]

T = TypeVar("T")


@dataclass(frozen=True)
class Codec:
    """How one family of extensions is read and written.

    ``decode(bytes) -> value`` and ``encode(value) -> bytes`` (``None`` when that direction is not
    supported); ``safe`` is ``False`` when decoding can run code from the data (pickle): the decoder then
    requires ``allow_unsafe=True``. ``unsafe_decode``, when set, is used instead of ``decode`` after that
    opt-in (``.pth``: a full ``torch.load`` instead of a weights-only one).

    >>> Codec(bytes.upper, bytes).decode(b"x")
    b'X'
    """

    decode: Callable[[bytes], Any] | None
    encode: Callable[[Any], bytes] | None
    safe: bool = True
    name: str = field(default="", kw_only=True)
    kind: str = field(default="data", kw_only=True)
    unsafe_decode: Callable[[bytes], Any] | None = field(default=None, kw_only=True)


def _image_encoder(ext: str) -> Callable[[Any], bytes] | None:
    if ext not in images._WRITE_FORMATS:
        return None

    def encode(value: Any, *, quality: int | None = None) -> bytes:
        return images.encode_image(value, ext, quality=quality)

    encode.__name__ = f"encode_{ext}"
    return encode


def _build() -> dict[str, Codec]:
    table: dict[str, Codec] = {}

    def add(extensions: str, codec: Codec) -> None:
        for ext in extensions.split():
            assert ext not in table, ext
            table[ext] = codec

    add("txt text transcript html htm", Codec(basic.text_loads, basic.text_dumps, name="text"))
    add("cls cls2 class count index inx id", Codec(basic.int_loads, basic.int_dumps, name="int"))
    add("json jsn", Codec(basic.json_loads, basic.json_dumps, name="json"))
    add("mp msgpack msg", Codec(basic.msgpack_loads, basic.msgpack_dumps, name="msgpack"))
    add("cbor", Codec(basic.cbor_loads, basic.cbor_dumps, name="cbor"))
    add("pyd pickle pkl", Codec(basic.pickle_loads, basic.pickle_dumps, safe=False, name="pickle"))
    add("npy", Codec(arrays.npy_loads, arrays.npy_dumps, name="npy"))
    add("npz", Codec(arrays.npz_loads, arrays.npz_dumps, name="npz"))
    add("ten tb tenbin", Codec(arrays.tenbin_loads, arrays.tenbin_dumps, name="tenbin"))
    add("safetensors", Codec(arrays.safetensors_loads, arrays.safetensors_dumps, name="safetensors"))
    add("pth", Codec(arrays.torch_loads, arrays.torch_dumps, name="pth", unsafe_decode=arrays.torch_loads_unsafe))
    for ext in sorted(images.IMAGE_EXTENSIONS):
        add(ext, Codec(images.image_loads, _image_encoder(ext), name="image", kind="image"))
    add("gz", Codec(basic.gzip_loads, basic.gzip_dumps, name="gzip", kind="wrapper"))
    return table


#: extension -> Codec, read-only. Keys are lower-case single components (``"jpg"``, ``"json"``, ``"gz"``).
CODECS: Mapping[str, Codec] = MappingProxyType(_build())


def match_extension(extension: str, table: Mapping[str, T]) -> tuple[str, T] | None:
    """THE extension rule: ``(matched key, value)`` for a field's extension in ``table`` (lower-case keys), trying
    the full extension first, then its last dot-component, case-insensitively; None when neither is there.

    >>> match_extension("Seg.JPG", {"jpg": "image"}), match_extension("seg.jpg", {"seg.jpg": "mask", "jpg": 1})
    (('jpg', 'image'), ('seg.jpg', 'mask'))
    """
    ext = extension.lower()
    value = table.get(ext)
    if value is not None:
        return ext, value
    last = ext.rpartition(".")[2]
    value = table.get(last)
    return (last, value) if value is not None else None


def lookup(extension: str) -> tuple[str, Codec] | None:
    """``(matched extension, codec)`` for a field's extension: full extension first, then its last component.

    >>> lookup("seg.png")[0], lookup("x.json.gz")[0], lookup("nope")
    ('png', 'gz', None)
    """
    return match_extension(extension, CODECS)


def get_codec(extension: str) -> Codec | None:
    """The :class:`Codec` for an extension (``"json"``, ``"seg.jpg"``, ``"JPG"``), or ``None``.

    >>> get_codec("json").encode({"a": 1})
    b'{"a": 1}'
    """
    found = lookup(extension)
    return found[1] if found is not None else None
