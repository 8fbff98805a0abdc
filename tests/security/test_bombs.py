"""Issue 18, item 2: decompression bombs are refused before their memory is allocated.

Each bomb of ``fuzz/bombs.py`` (a 4 MB ``.json.gz`` of gigabytes, a 2 MB ``.npz`` of 1.2 GB, ``.npz``/``.npy``
declaring huge shapes, a 1 MB PNG of 12,000 x 12,000 16-bit RGBA pixels, a 34-byte WebP of 12,900 x 12,900, a
small JPEG of 12,000 x 12,000) is decoded in a fresh process: it raises :class:`DecodeLimitError` naming the
shard, key and field, and the process's peak RSS grows by far less than the bomb's inflated size.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from shardstream.codecs import Decoder, decode_field
from shardstream.codecs.arrays import npy_dumps, npy_loads, npz_dumps, npz_loads
from shardstream.codecs.basic import gzip_loads
from shardstream.codecs.images import decode_image, encode_image
from shardstream.errors import DecodeError, DecodeLimitError

FUZZ = pathlib.Path(__file__).resolve().parents[2] / "fuzz"
sys.path.insert(0, str(FUZZ))
import bombs  # noqa: E402

MB = 1 << 20


def _decode_in_subprocess(builders: dict[str, str], env: dict[str, str] | None = None) -> dict[str, dict]:
    """``{name: {"error": type, "field": ..., "growth_mb": ...}}`` for each bomb, decoded with Decoder("rgb8")."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(FUZZ)!r})
        import bombs
        from shardstream.codecs import Decoder
        built = {{name: eval(call, vars(bombs)) for name, call in {builders!r}.items()}}
        decoder = Decoder("rgb8")
        for name, (field, data) in built.items():
            before = bombs.peak_rss_kb()
            try:
                decoder({{"__key__": "k", "__url__": "shard.tar", field: data}})
                error = None
            except Exception as e:
                error = {{"type": type(e).__name__, "url": getattr(e, "url", None), "key": getattr(e, "key", None),
                         "field": getattr(e, "field", None), "message": str(e)}}
            after = bombs.peak_rss_kb()
            print(json.dumps({{"name": name, "error": error, "growth_mb": (after - before) / 1024}}), flush=True)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                            env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stderr[-3000:]
    return {r["name"]: r for r in map(json.loads, result.stdout.splitlines())}


def test_bombs_are_refused_with_small_peak_memory():
    results = _decode_in_subprocess({
        "npz": "npz_bomb(1200 << 20)", "npz shape": "npz_shape_bomb()", "npy shape": "npy_shape_bomb()",
        "png": "png_bomb()", "webp": "webp_bomb()", "jpeg": "jpeg_bomb()", "png over pillow": "png_bomb(20000, 20000)",
    })
    for name, result in results.items():
        error = result["error"]
        assert error is not None, name
        assert (error["url"], error["key"]) == ("shard.tar", "k"), result
        assert error["field"] in ("x.npz", "x.npy", "x.png", "x.webp", "x.jpg"), result
        assert error["type"] == "DecodeLimitError", result
        assert result["growth_mb"] < 64, result


def test_a_gzip_bomb_stops_at_the_limit():
    """Gunzipped size is only known by inflating: the limit (lowered here to 64 MiB) bounds what is allocated."""
    results = _decode_in_subprocess({"gz": "gzip_bomb(2 << 30)"}, {"SHARDSTREAM_MAX_DECODED_BYTES": "64M"})
    result = results["gz"]
    assert result["error"]["type"] == "DecodeLimitError" and result["error"]["field"] == "x.json.gz", result
    assert "SHARDSTREAM_MAX_DECODED_BYTES" in result["error"]["message"]
    assert result["growth_mb"] < 64 + 80, result


def test_arguments_set_exact_limits():
    data = gzip.compress(bytes(5000))
    assert len(gzip_loads(data, max_size=5000)) == 5000
    with pytest.raises(DecodeLimitError, match="5000 bytes, which exceeds the limit of 4999"):
        gzip_loads(data, max_size=4999)
    arrays = npz_dumps({"a": np.zeros(100), "b": np.zeros(100)})
    assert set(npz_loads(arrays, max_size=2000)) == {"a", "b"}
    with pytest.raises(DecodeLimitError):
        npz_loads(arrays, max_size=1000)
    png = encode_image(np.zeros((30, 40), np.uint8), "png")
    assert decode_image(png, "l8", max_pixels=1200).shape == (30, 40)
    with pytest.raises(DecodeLimitError, match="40 x 30 pixels"):
        decode_image(png, "l8", max_pixels=1199)


def test_settings_raise_the_limits(monkeypatch):
    _, png = bombs.png_bomb(2100, 2100)  # 4.4 Mpx: above the pixels checked for free
    monkeypatch.setenv("SHARDSTREAM_MAX_IMAGE_PIXELS", "4000000")
    with pytest.raises(DecodeLimitError, match="SHARDSTREAM_MAX_IMAGE_PIXELS"):
        decode_field("png", png, imagespec="l8")
    monkeypatch.setenv("SHARDSTREAM_MAX_IMAGE_PIXELS", "5000000")
    assert decode_field("png", png, imagespec="l8").shape == (2100, 2100)


def test_gunzip_matches_the_standard_library():
    for data in (b"", b"abc", bytes(100000), os.urandom(3000)):
        packed = gzip.compress(data)
        assert gzip_loads(packed) == gzip.decompress(packed)
        assert gzip_loads(packed + gzip.compress(b"more") + bytes(7)) == data + b"more"  # members, zero padding
    with pytest.raises(EOFError):
        gzip_loads(gzip.compress(b"hello world" * 100)[:-12])
    with pytest.raises(DecodeError):
        Decoder()({"x.txt.gz": b"not gzip"})


def test_npy_declaring_more_than_it_holds_is_refused_before_allocating():
    field, data = bombs.npy_shape_bomb((1000,))
    with pytest.raises(ValueError, match="declares 8000 bytes of data, but 16 follow"):
        npy_loads(data)
    with pytest.raises(DecodeLimitError):
        npy_loads(bombs.npy_shape_bomb((1 << 40,))[1])
    assert npy_loads(npy_dumps(np.arange(6).reshape(2, 3))).tolist() == [[0, 1, 2], [3, 4, 5]]
    bio = io.BytesIO()
    np.save(bio, np.array([1.5, 2.5], dtype=">f4"))
    assert npy_loads(bio.getvalue()).tolist() == [1.5, 2.5]


def test_the_viewer_refuses_image_bombs_too():
    from shardstream.viewer.render import thumbnail

    field, data = bombs.webp_bomb()
    with pytest.raises(DecodeLimitError, match="12900 x 12900 pixels"):
        thumbnail("webp", data)
