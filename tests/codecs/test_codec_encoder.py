"""encode_sample: bytes untouched, str as UTF-8, table encoding, encoder modes, .gz, errors, determinism."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from shardstream.codecs import Decoder, encode_field, encode_sample
from shardstream.errors import EncodeError


def test_bytes_pass_through_unchanged_even_for_image_extensions(rgb_image):
    jpeg = encode_field("jpg", rgb_image, jpeg_quality=50)
    sample = {"__key__": "k", "jpg": jpeg, "png": b"not even a png", "json": b"{}", "weird": b"\x00"}
    out = encode_sample(sample)
    assert out == {"jpg": jpeg, "png": b"not even a png", "json": b"{}", "weird": b"\x00"}
    assert out["jpg"] is jpeg  # identical object: nothing was re-encoded
    assert encode_sample(sample, jpeg_quality=10)["jpg"] is jpeg


def test_bytearray_and_memoryview_become_bytes():
    out = encode_sample({"a": bytearray(b"x"), "b": memoryview(b"y")})
    assert out == {"a": b"x", "b": b"y"} and all(type(v) is bytes for v in out.values())


def test_dunder_fields_dropped_and_field_names_kept():
    out = encode_sample({"__key__": "k", "__url__": "u", "__local_path__": "p", "Seg.JPG": b"x", "txt": "t"})
    assert out == {"Seg.JPG": b"x", "txt": b"t"}


def test_str_is_utf8_for_any_extension():
    assert encode_sample({"txt": "é", "json": '{"a":1}', "unknown": "u"}) == {
        "txt": "é".encode(),
        "json": b'{"a":1}',
        "unknown": b"u",
    }


def test_webdataset_compatible_outputs():
    assert encode_sample({"cls": 3, "index": np.int64(4), "id": True}) == {"cls": b"3", "index": b"4", "id": b"1"}
    assert encode_field("json", {"a": 1, "b": [1, 2]}) == b'{"a": 1, "b": [1, 2]}'


def test_gz_deterministic_and_bytes_under_gz():
    one, two = encode_field("json.gz", {"a": 1}), encode_field("json.gz", {"a": 1})
    assert one == two and gzip.decompress(one) == b'{"a": 1}'
    assert one[4:8] == b"\0\0\0\0"  # mtime 0
    raw = encode_field("txt.gz", b"plain bytes")  # raw bytes are gzipped, as webdataset does
    assert gzip.decompress(raw) == b"plain bytes"
    already = gzip.compress(b"x", mtime=123)
    assert encode_field("txt.gz", already) == already  # already gzip data: kept as it is
    assert encode_field("txt.gz", "é") == gzip.compress("é".encode(), mtime=0)
    assert gzip.decompress(encode_field("TXT.GZ", b"upper")) == b"upper"


def test_encoder_false_accepts_bytes_and_str_only():
    assert encode_sample({"__key__": "k", "a": b"x", "b": "y"}, encoder=False) == {"a": b"x", "b": b"y"}
    with pytest.raises(EncodeError, match="encoder=False") as info:
        encode_sample({"__key__": "k", "cls": 3}, encoder=False)
    assert (info.value.key, info.value.field) == ("k", "cls")
    assert encode_sample({"x.gz": b"raw"}, encoder=False) == {"x.gz": b"raw"}  # nothing is touched


def test_custom_callable_encoder():
    def enc(sample):
        return {"__key__": sample["__key__"], "cls": str(sample["cls"] * 2), "bin": bytearray(b"z")}

    assert encode_sample({"__key__": "k", "cls": 2}, encoder=enc) == {"cls": b"4", "bin": b"z"}
    with pytest.raises(EncodeError, match="custom encoder"):
        encode_sample({"cls": 1}, encoder=lambda s: {"cls": 1})
    with pytest.raises(EncodeError, match="not a dict"):
        encode_sample({"cls": 1}, encoder=lambda s: [1])


def test_dict_encoder_overrides_per_extension():
    out = encode_sample({"cls": 5, "txt": "t", "json": [1]}, encoder={"cls": lambda v: b"class-%d" % v})
    assert out == {"cls": b"class-5", "txt": b"t", "json": b"[1]"}


def test_bad_encoder_spec():
    with pytest.raises(EncodeError, match="encoder must be"):
        encode_sample({"cls": 1}, encoder=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("cls", 2.5, "needs an int"),
        ("cls", "x", None),  # str is written as given: no error
        ("txt", 5, "needs a str"),
        ("json", {"a": object()}, "TypeError"),
        ("npz", [1, 2], "dict of str"),
        ("npy", np.array([object()]), "object array"),
        ("xyz", 3, "no encoder"),
        ("ten", [np.array([True])], "dtype"),
    ],
)
def test_unencodable_values_name_key_and_field(field, value, message):
    sample = {"__key__": "sample-9", field: value}
    if message is None:
        assert encode_sample(sample) == {field: value.encode()}
        return
    with pytest.raises(EncodeError, match=message) as info:
        encode_sample(sample)
    e = info.value
    assert (e.key, e.field) == ("sample-9", field)
    assert "sample-9" in str(e) and repr(field) in str(e)
    assert isinstance(e, ValueError)


def test_encode_decode_whole_sample_deterministic(rgb_image):
    sample = {
        "__key__": "k",
        "jpg": rgb_image,
        "seg.png": rgb_image[:, :, 0],
        "cls": 1,
        "json": {"b": 2, "a": [1.5]},
        "npz": {"x": np.arange(3)},
        "mp": {"m": 1},
        "ten": np.ones(3, np.float32),
    }
    first, second = encode_sample(sample), encode_sample(sample)
    assert first == second
    out = Decoder("rgb8")({"__key__": "k", **first})
    assert np.array_equal(out["seg.png"][:, :, 0], rgb_image[:, :, 0])
    assert out["cls"] == 1 and out["json"] == {"b": 2, "a": [1.5]} and out["mp"] == {"m": 1}
    assert np.array_equal(out["npz"]["x"], np.arange(3))
