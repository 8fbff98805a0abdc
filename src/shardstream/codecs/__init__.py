"""Codecs: ONE table from extension to (decode, encode, safe), used by both the reader and the writer.

- :data:`CODECS` / :func:`get_codec`: the table (:mod:`.table`).
- :class:`Decoder`: decode samples by extension, with webdataset's handler chain, image specs
  (:data:`IMAGE_SPECS`) and ``.gz`` unwrapping; safe by default (no unpickling without ``allow_unsafe=True``).
- :func:`encode_sample`: the writer's side; bytes pass through untouched.

Extensions (full extension tried first, then the last dot-component; case-insensitive)::

    txt text transcript html htm        str (UTF-8)
    cls cls2 class count index inx id   int (ASCII decimal)
    json jsn                            JSON
    mp msgpack msg                      MessagePack
    cbor                                CBOR (extra ``cbor``)
    npy / npz                           numpy array / dict of arrays (allow_pickle=False)
    ten tb tenbin                       list of arrays (webdataset tensor binary)
    safetensors                         dict of numpy arrays (extra ``safetensors``)
    pth                                 torch.load, weights-only unless allow_unsafe=True (extra ``torch``)
    pyd pickle pkl                      pickle: UNSAFE, decoding needs allow_unsafe=True
    jpg jpeg png ppm pgm pbm pnm tif tiff webp bmp gif ...   images, decoded when an image spec is given
    gz                                  gunzip, then decode by the inner extension (``x.json.gz`` -> JSON)

>>> import numpy as np
>>> raw = encode_sample({"__key__": "s1", "npy": np.arange(3), "json.gz": {"a": 1}})
>>> out = Decoder()({"__key__": "s1", **raw})
>>> out["npy"].tolist(), out["json.gz"]
([0, 1, 2], {'a': 1})
"""

from __future__ import annotations

from . import tenbin
from .arrays import npy_dumps as numpy_dumps, torch_dumps, torch_loads
from .decoder import (
    Continue,
    Decoder,
    ExtensionHandler,
    as_decoder,
    decode_field,
    gzfilter,
    handle_extension,
)
from .encoder import encode_field, encode_sample
from .images import (
    IMAGE_EXTENSIONS,
    IMAGE_SPECS,
    ImageHandler,
    decode_image,
    decode_resized,
    encode_image,
    imagehandler,
)
from .media import torch_audio, torch_video
from .table import CODECS, Codec, get_codec

__all__ = [
    "CODECS",
    "Codec",
    "Continue",
    "Decoder",
    "ExtensionHandler",
    "IMAGE_EXTENSIONS",
    "IMAGE_SPECS",
    "ImageHandler",
    "as_decoder",
    "decode_field",
    "decode_image",
    "decode_resized",
    "encode_field",
    "encode_image",
    "encode_sample",
    "get_codec",
    "gzfilter",
    "handle_extension",
    "imagehandler",
    "numpy_dumps",
    "tenbin",
    "torch_audio",
    "torch_dumps",
    "torch_loads",
    "torch_video",
]
