"""The one codec table: every webdataset 1.0.2 extension, both directions, safety flags, lookup rule."""

from __future__ import annotations

import dataclasses

import pytest

from shardstream.codecs import CODECS, IMAGE_EXTENSIONS, Codec, get_codec
from shardstream.codecs.table import lookup

# what webdataset 1.0.2 decodes (autodecode.decoders) and encodes (writer.make_handlers)
WDS_DECODES = "txt text transcript cls cls2 index inx id json jsn pkl pickle pyd pth ten tb mp msg npy npz cbor".split()
WDS_ENCODES = (
    "cls cls2 class count index inx id txt text transcript html htm pyd pickle pth npy npz ten tenbin tb "
    "json jsn mp msgpack msg cbor jpg jpeg img image png pbm pgm ppm tiff tif"
).split()
IMAGES_REQUIRED = "jpg jpeg png ppm pgm pbm pnm tif tiff webp bmp gif".split()


@pytest.mark.parametrize("ext", sorted(set(WDS_DECODES + WDS_ENCODES + ["safetensors", "gz", "pkl", "class", "count"])))
def test_every_webdataset_extension_reads_and_writes(ext):
    codec = CODECS[ext]
    assert codec.decode is not None and codec.encode is not None


def test_image_extensions():
    assert set(IMAGES_REQUIRED) <= IMAGE_EXTENSIONS
    for ext in IMAGE_EXTENSIONS:
        assert CODECS[ext].kind == "image"
    for ext in IMAGES_REQUIRED:
        assert CODECS[ext].encode is not None, ext


def test_only_pickles_are_unsafe():
    unsafe = {ext for ext, codec in CODECS.items() if not codec.safe}
    assert unsafe == {"pyd", "pickle", "pkl"}
    assert CODECS["pth"].safe and CODECS["pth"].unsafe_decode is not None


def test_one_codec_object_per_family():
    assert CODECS["json"] is CODECS["jsn"]
    assert CODECS["cls"] is CODECS["id"]
    assert CODECS["mp"] is CODECS["msgpack"] is CODECS["msg"]


def test_lookup_full_extension_then_last_component_case_insensitive():
    assert lookup("seg.jpg") == ("jpg", CODECS["jpg"])
    assert lookup("SEG.JPG") == ("jpg", CODECS["jpg"])
    assert lookup("x.json.gz") == ("gz", CODECS["gz"])
    assert lookup("npy") == ("npy", CODECS["npy"])
    assert lookup("weird") is None and lookup("") is None
    assert get_codec("Cls").name == "int"
    assert get_codec("nothing") is None


def test_table_is_read_only_and_codecs_frozen():
    with pytest.raises(TypeError):
        CODECS["new"] = CODECS["txt"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        CODECS["txt"].safe = False  # type: ignore[misc]
    assert Codec(None, None).kind == "data"
