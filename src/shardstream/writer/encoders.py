"""webdataset's writer-side encoding helpers (``webdataset.writer``), over shardstream's one codec table.

>>> import numpy as np
>>> encode_based_on_extension({"__key__": "k", "cls": 3, "txt": "hi"}, default_handlers)
{'__key__': 'k', 'cls': b'3', 'txt': b'hi'}
>>> imageencoder(np.zeros((2, 2, 3), np.uint8), "png")[:4]
b'\\x89PNG'
>>> make_encoder(False)({"txt": b"x"})
{'txt': b'x'}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..codecs import encode_image, numpy_dumps, torch_dumps
from ..codecs.arrays import npz_dumps as numpy_npz_dumps, tenbin_dumps
from ..codecs.basic import cbor_dumps, msgpack_dumps as mp_dumps
from ..codecs.encoder import encode_sample
from ..codecs.table import CODECS
from ..errors import ConfigError, EncodeError
from ..io import gopen

__all__ = [
    "add_handlers", "bytestr", "cbor_dumps", "default_handlers", "encode_based_on_extension",
    "encode_based_on_extension1", "gopen", "imageencoder", "make_encoder", "make_handlers", "mp_dumps",
    "numpy_dumps", "numpy_npz_dumps", "tenbin_dumps", "torch_dumps",
]

Handler = Callable[[Any], bytes]
_FORMATS = {"jpeg": "jpg", "img": "ppm", "image": "ppm"}


def imageencoder(image: Any, format: str = "PNG") -> bytes:  # noqa: A002 - webdataset's parameter name
    """Encode a PIL image or an array (uint8, or floats in [0, 1]) as ``format`` (PNG, JPG (quality 100), PPM...)."""
    ext = format.lower()
    return encode_image(image, _FORMATS.get(ext, ext))


def bytestr(data: Any) -> bytes:
    """``bytes`` as they are, anything else as its ASCII ``str``."""
    if isinstance(data, bytes):
        return data
    return (data if isinstance(data, str) else str(data)).encode("ascii")


def add_handlers(d: dict[str, Handler], keys: str | list[str], value: Handler) -> None:
    """``d[k] = value`` for every extension in ``keys`` (a list or a space-separated string)."""
    for k in keys.split() if isinstance(keys, str) else keys:
        d[k] = value


def make_handlers() -> dict[str, Handler]:
    """extension -> encoder, from the codec table (the same table the reader decodes with)."""
    return {ext: codec.encode for ext, codec in CODECS.items() if codec.encode is not None and codec.kind != "wrapper"}


#: the encoders ``TarWriter(encoder=True)`` uses
default_handlers = make_handlers()


def encode_based_on_extension1(data: Any, tname: str, handlers: dict[str, Handler]) -> Any:
    """Encode one value by the extension of ``tname``: bytes and str pass (str as UTF-8), ``.gz`` compresses,
    ``__*`` metadata must be a str and stays one."""
    if tname.startswith("_"):
        if not isinstance(data, str):
            raise EncodeError(f"the value of metadata field {tname!r} must be a str, not {type(data).__name__}")
        return data
    return encode_sample({tname: data}, encoder=handlers)[tname]


def encode_based_on_extension(sample: dict[str, Any], handlers: dict[str, Handler]) -> dict[str, Any]:
    """Every field of ``sample`` through :func:`encode_based_on_extension1`."""
    return {k: encode_based_on_extension1(v, k, handlers) for k, v in sample.items()}


def make_encoder(spec: bool | str | dict[str, Handler] | Callable[..., Any] | None) -> Callable[[dict], dict]:
    """A sample encoder: False/None leaves samples alone, True uses :data:`default_handlers`, a dict its
    handlers, a callable is the encoder."""
    if spec is False or spec is None:
        return lambda sample: sample
    if callable(spec):
        return spec
    if isinstance(spec, dict):
        return lambda sample: encode_based_on_extension(sample, spec)
    if spec is True:
        return lambda sample: encode_based_on_extension(sample, default_handlers)
    raise ConfigError(f"{spec!r}: unknown encoder spec (use True, False, a dict of handlers or a callable)")


