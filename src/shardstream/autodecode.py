"""webdataset's ``autodecode`` module: decoding fields by extension. The decoders are shardstream's
(:mod:`shardstream.codecs`: one table for reading and writing); this module gives them webdataset's names.

Differences, both on the side of safety: unpickling (``.pyd``, ``.pickle``) and a full ``torch.load`` of ``.pth``
need ``Decoder(..., allow_unsafe=True)``, so ``pytorch_weights_only`` is always True here; secure mode
(``utils.enforce_security``) refuses :func:`unpickle_loads` as webdataset does.

>>> basichandlers("cls", b"7"), basichandlers("x.json", b'{"a": 1}'), basichandlers("jpg", b"...") is None
(7, {'a': 1}, True)
>>> call_extension_handler("seg.png", b"", lambda data: "mask", "seg.png")
'mask'
>>> default_decoder({"__key__": "k", "txt": b"hello"})
{'__key__': 'k', 'txt': 'hello'}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .codecs import (
    IMAGE_EXTENSIONS,
    Continue,
    Decoder,
    ImageHandler,
    gzfilter,
    handle_extension,
    imagehandler,
    torch_audio,
    torch_loads,
    torch_video,
)
from .codecs.arrays import npy_loads, npz_loads, tenbin_loads
from .codecs.basic import cbor_loads, msgpack_loads, pickle_loads
from .codecs.images import IMAGE_SPECS
from .codecs.table import CODECS, lookup
from .config import secure_mode, secure_refusal
from .errors import DecodingError as DecodingError

__all__ = [
    "Continue", "Decoder", "DecodingError", "IMAGE_EXTENSIONS", "ImageHandler", "basichandlers",
    "call_extension_handler", "cbor_loads", "decoders", "default_decoder", "default_post_handlers",
    "default_pre_handlers", "gzfilter", "handle_extension", "imagehandler", "imagespecs", "msgpack_loads",
    "npy_loads", "npz_loads", "pytorch_weights_only", "tenbin_loads", "torch_audio", "torch_loads", "torch_video",
    "unpickle_loads",
]

#: always True in shardstream: ``.pth`` is loaded weights-only unless the decoder has ``allow_unsafe=True``
pytorch_weights_only = True
#: image spec -> (kind, type, mode), as in webdataset (``"rgb8"``, ``"torchrgb"``, ``"pil"``...)
imagespecs = dict(IMAGE_SPECS)


def unpickle_loads(data: bytes) -> Any:
    """Unpickle (runs code from the data: call it only on data you trust). Refused in secure mode."""
    if secure_mode():
        raise secure_refusal("unpickle", "unpickling, which runs code from the data", "unset secure mode to allow it")
    return pickle_loads(data)


#: extension -> ``bytes -> value`` for the data (non-image) extensions of the codec table
decoders = {ext: codec.decode for ext, codec in CODECS.items() if codec.kind == "data" and codec.decode}
decoders.update({ext: unpickle_loads for ext, codec in CODECS.items() if codec.name == "pickle"})


def basichandlers(key: str, data: bytes) -> Any:
    """Decode ``data`` by the extension ``key`` (safe codecs of the table); None when no codec applies."""
    found = lookup(key[1:] if key.startswith(".") else key)
    if found is None or found[1].kind != "data" or not found[1].safe or found[1].decode is None:
        return None
    return found[1].decode(data)


def call_extension_handler(key: str, data: bytes, f: Callable[[bytes], Any], extensions: str | Iterable[str]) -> Any:
    """``f(data)`` when ``key``'s extension is one of ``extensions`` (see :func:`handle_extension`), else None."""
    return handle_extension(extensions, f)(key, data)


#: handlers a webdataset Decoder runs before and after the user's (``.gz`` unwrapping; the basic extensions)
default_pre_handlers = [gzfilter]
default_post_handlers = [basichandlers]
#: a Decoder with the default handlers only
default_decoder = Decoder()
