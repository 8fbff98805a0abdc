"""The public surface of shardstream.codecs is pinned: __all__ is sorted, complete and importable."""

from __future__ import annotations

import shardstream.codecs as codecs

EXPECTED = [
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


def test_all_is_pinned_and_sorted():
    assert codecs.__all__ == EXPECTED
    assert codecs.__all__ == sorted(codecs.__all__)


def test_every_name_exists_and_public_callables_have_docstrings():
    for name in codecs.__all__:
        obj = getattr(codecs, name)
        if callable(obj) and name not in ("torch_video", "torch_audio", "gzfilter"):
            assert obj.__doc__, name


def test_torch_is_not_imported_by_the_codecs(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, numpy as np; from shardstream.codecs import Decoder, encode_sample; "
        "raw = encode_sample({'png': np.zeros((2, 2), np.uint8), 'cls': 1, 'npy': np.zeros(2)}); "
        "Decoder('rgb')(raw); assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
