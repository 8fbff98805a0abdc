"""encode then decode gives the value back, for every codec; encoding is deterministic."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.codecs import CODECS, Decoder, decode_field, encode_field, encode_sample

torch = pytest.importorskip("torch")


def same(a, b) -> bool:
    """Deep equality that understands numpy arrays and torch tensors."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


ARR = np.arange(12, dtype=np.float32).reshape(3, 4)
CASES = {
    "txt": "hello, wörld",
    "text": "",
    "transcript": "line1\nline2",
    "html": "<p>é</p>",
    "htm": "<br>",
    "cls": 3,
    "cls2": 0,
    "class": -5,
    "count": 10**20,
    "index": 7,
    "inx": 1,
    "id": 123456,
    "json": {"a": [1, 2.5, None, True], "b": {"c": "ü"}},
    "jsn": [1, "x"],
    "mp": {"a": [1, 2.5, None, True], "b": b"raw", "c": {"d": "ü"}},
    "msgpack": [1, 2],
    "msg": ["s"],
    "cbor": {"a": [1, 2.5, None], "b": b"raw"},
    "pyd": {"a": (1, 2), "s": {3}},
    "pickle": [1, 2],
    "pkl": ("p",),
    "npy": ARR,
    "npz": {"a": ARR, "b": np.array([1, 2], dtype=np.int8)},
    "ten": [ARR, np.arange(3, dtype=np.int64)],
    "tb": [np.ones((2, 2), dtype=np.uint16)],
    "tenbin": [np.zeros(1)],
    "safetensors": {"w": ARR, "b": np.arange(4, dtype=np.int32)},
    "pth": {"w": torch.ones(2, 3), "step": 10, "names": ["a", "b"]},
}


def test_cases_cover_every_data_codec():
    data_exts = {ext for ext, codec in CODECS.items() if codec.kind == "data"}
    assert data_exts == set(CASES)


@pytest.mark.parametrize("ext", sorted(CASES))
def test_round_trip(ext):
    value = CASES[ext]
    data = encode_field(ext, value)
    assert isinstance(data, bytes)
    assert same(value, decode_field(ext, data, allow_unsafe=True))
    assert encode_field(ext, value) == data, "encoding must be deterministic"


@pytest.mark.parametrize("ext", ["json", "cls", "npy", "txt", "pth"])
def test_gz_round_trip_and_determinism(ext):
    value = CASES[ext]
    field = f"{ext}.gz"
    data = encode_field(field, value)
    assert data[:2] == b"\x1f\x8b" and data == encode_field(field, value)
    assert gzip.decompress(data) == encode_field(ext, value)
    assert same(value, decode_field(field, data))


def test_tenbin_single_array_decodes_to_a_list():
    assert same([ARR], decode_field("ten", encode_field("ten", ARR)))


def test_torch_tensor_values_for_array_codecs():
    t = torch.arange(6, dtype=torch.int16).reshape(2, 3)
    assert same(t.numpy(), decode_field("npy", encode_field("npy", t)))
    assert same({"t": t.numpy()}, decode_field("safetensors", encode_field("safetensors", {"t": t})))


def test_matches_webdataset_writer_bytes():
    # webdataset's writer: str(x).encode("ascii"), json.dumps(x).encode(), numpy.lib.format.write_array
    assert encode_field("cls", 3) == b"3"
    assert encode_field("json", {"a": [1, 2]}) == json.dumps({"a": [1, 2]}).encode()
    assert encode_field("txt", "x") == b"x"


def test_whole_sample_round_trip():
    sample = {"__key__": "k", "txt": "a", "cls": 2, "json.gz": {"x": 1}, "npy": ARR, "seg.npy": ARR + 1}
    encoded = encode_sample(sample)
    assert set(encoded) == {"txt", "cls", "json.gz", "npy", "seg.npy"}
    decoded = Decoder()({"__key__": "k", **encoded})
    assert same(sample, decoded)


# ---- property-based round trips --------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
dtypes = st.sampled_from(["uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool", "complex64"])


def test_str_values_are_written_as_utf8_for_every_extension():
    # as webdataset: a str is already-encoded content (e.g. json.dumps output), never re-encoded
    assert encode_field("json", '{"a": 1}') == b'{"a": 1}'
    assert encode_field("mp", "x") == b"x"
    assert decode_field("json", encode_field("json", '{"a": 1}')) == {"a": 1}


not_str = lambda v: not isinstance(v, (str, bytes))  # noqa: E731  (top-level str/bytes are written raw)


@settings(max_examples=60, deadline=None)
@given(json_values.filter(not_str))
def test_json_property(value):
    assert decode_field("json", encode_field("json", value)) == value


@settings(max_examples=60, deadline=None)
@given(msgpack_values.filter(not_str))
def test_msgpack_property(value):
    assert decode_field("mp", encode_field("mp", value)) == value


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_txt_property(value):
    assert decode_field("txt", encode_field("txt", value)) == value


@settings(max_examples=60, deadline=None)
@given(st.integers() | st.booleans())
def test_cls_property(value):
    assert decode_field("cls", encode_field("cls", value)) == int(value)


@settings(max_examples=40, deadline=None)
@given(dtypes, st.lists(st.integers(0, 4), min_size=0, max_size=3), st.randoms(use_true_random=False))
def test_npy_property(dtype, shape, rng):
    array = (np.array([rng.random() * 100 for _ in range(int(np.prod(shape)))]).reshape(shape)).astype(dtype)
    out = decode_field("npy", encode_field("npy", array))
    assert same(array, out)
