"""How the viewer describes and renders fields (shardstream.viewer.render), without a server."""

from __future__ import annotations

import gzip
import io

import msgpack
import numpy as np
import PIL.Image
import pytest

from shardstream.codecs import encode_field
from shardstream.viewer.render import (MAX_DECODE, Thumbnails, array_image, describe_field, hexdump, npy_renderable,
                                       rendered_image, thumbnail, unwrap)


def png(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    PIL.Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def test_gz_fields_are_unwrapped_with_a_bound():
    assert describe_field("json.gz", gzip.compress(b'{"a": 1}'))["text"] == '{\n  "a": 1\n}'
    assert describe_field("txt.gz", gzip.compress(b"hi"))["text"] == "hi"
    image = describe_field("png.gz", gzip.compress(png(np.zeros((4, 6, 3), np.uint8))))
    assert image["kind"] == "image" and (image["width"], image["height"]) == (6, 4) and image["native"]
    bomb = gzip.compress(bytes(MAX_DECODE + 1))
    with pytest.raises(ValueError, match="exceeds"):
        unwrap("txt.gz", bomb)
    assert describe_field("txt.gz", bomb)["kind"] == "error"


def test_other_kinds():
    assert describe_field("msgpack", msgpack.packb({"x": [1, 2]}))["kind"] == "json"
    assert describe_field("cls", b"7")["name"] is None  # no class list
    assert describe_field("cls", b"7", classes=["a"])["name"] is None  # out of range: the number only
    assert describe_field("id", b"3", classes=["a", "b", "c", "d"])["name"] is None  # class names are for .cls
    assert describe_field("caption", "naïve <b>".encode())["text"] == "naïve <b>"  # no codec, but UTF-8 text
    binary = describe_field("bin", bytes(range(256)))
    assert binary["kind"] == "binary" and binary["hex"].startswith("00000000  00 01 02")
    assert describe_field("mp3", b"ID3...")["kind"] == "audio" and describe_field("webm", b"")["kind"] == "video"
    ten = describe_field("npy", encode_field("npy", np.arange(6, dtype=np.int16).reshape(2, 3)))["arrays"][0]
    assert ten["shape"] == [2, 3] and ten["dtype"] == "int16" and ten["image"]
    assert describe_field("pickle", b"garbage")["kind"] == "unsafe"
    assert describe_field("png", b"not a png")["kind"] == "error"
    big = describe_field("json", b"[1, 2", size=MAX_DECODE + 1)
    assert big["kind"] == "binary" and "larger than" in big["note"]


def test_arrays_as_images():
    assert array_image(np.array([[0.0, 0.5], [1.0, 0.25]])).tolist() == [[0, 128], [255, 64]]
    assert array_image(np.array([[-1.0, 1.0]])).tolist() == [[0, 255]]  # outside [0, 1]: stretched
    assert array_image(np.array([[True, False]])).tolist() == [[255, 0]]
    assert array_image(np.zeros((3, 5, 7))).shape == (5, 7, 3)  # CHW
    assert array_image(np.zeros((1, 1, 5, 7), np.uint8)).shape == (5, 7)
    assert array_image(np.zeros(5)) is None and array_image(np.zeros((5, 5, 7))) is None
    assert array_image(np.array([["a"]])) is None
    assert npy_renderable(encode_field("npy", np.zeros((8, 8), np.float32)))
    assert not npy_renderable(encode_field("npy", np.zeros(8))) and not npy_renderable(b"junk")
    assert PIL.Image.open(io.BytesIO(rendered_image("npy", encode_field("npy", np.eye(4))))).size == (4, 4)


def test_thumbnails():
    data, kind = thumbnail("png", png(np.zeros((600, 300, 3), np.uint8)))
    assert kind == "image/jpeg" and PIL.Image.open(io.BytesIO(data)).size == (96, 192)
    data, kind = thumbnail("png", png(np.zeros((10, 10, 4), np.uint8)))
    assert kind == "image/png" and PIL.Image.open(io.BytesIO(data)).mode == "RGBA"
    with pytest.raises(ValueError):
        thumbnail("txt", b"words")
    cache = Thumbnails(max_bytes=100)
    for i in range(5):
        cache.get(i, lambda: (bytes(30), "image/png"))
    assert len(cache) == 3 and 4 in cache and 0 not in cache  # least recently used went first
    assert cache.get("bad", lambda: 1 / 0) is None and "bad" in cache  # a failure is remembered


def test_hexdump_marks_the_rest():
    assert hexdump(bytes(600)).splitlines()[-1] == "... 88 more bytes"
