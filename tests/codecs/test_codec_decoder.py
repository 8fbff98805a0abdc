"""Decoder: handler chain, handle_extension, .gz, safety opt-in, error context, only/partial, metadata."""

from __future__ import annotations

import gzip
import json
import pickle

import numpy as np
import pytest

from shardstream.codecs import (
    Continue,
    Decoder,
    decode_field,
    encode_field,
    gzfilter,
    handle_extension,
    torch_audio,
    torch_video,
)
from shardstream.errors import ConfigError, DecodeError, MissingDependencyError, UnsafeDecodeError

SAMPLE = {"__key__": "k1", "__url__": "s-000.tar", "txt": b"hi", "cls": b"4", "json": b'{"a": 1}', "bin": b"\x00"}


def test_default_decoding_returns_a_new_dict():
    sample = dict(SAMPLE)
    out = Decoder()(sample)
    assert out == {"__key__": "k1", "__url__": "s-000.tar", "txt": "hi", "cls": 4, "json": {"a": 1}, "bin": b"\x00"}
    assert sample == SAMPLE and out is not sample


def test_metadata_passes_through_and_bytes_metadata_becomes_str():
    out = Decoder()({"__key__": b"k", "__local_path__": "/x", "__weird__": b"\xff"})
    assert out == {"__key__": "k", "__local_path__": "/x", "__weird__": b"\xff"}


def test_gz_unwrapping_by_inner_extension():
    z = gzip.compress
    sample = {"x.json.gz": z(b"[1, 2]"), "txt.gz": z("é".encode()), "gz": z(b"raw")}
    assert Decoder()(sample) == {"x.json.gz": [1, 2], "txt.gz": "é", "gz": b"raw"}


def test_gz_then_image_spec():
    png = encode_field("png", np.zeros((2, 2), np.uint8))
    out = Decoder("l8")({"png.gz": gzip.compress(png)})
    assert out["png.gz"].shape == (2, 2)


def test_json_null_decodes_to_none():
    assert Decoder()({"json": b"null"}) == {"json": None}


# ---- safety -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ext", ["pyd", "pickle", "pkl"])
def test_pickle_needs_opt_in(ext):
    data = pickle.dumps({"a": 1})
    with pytest.raises(UnsafeDecodeError) as info:
        Decoder()({"__key__": "k", "__url__": "u.tar", ext: data})
    message = str(info.value)
    assert "Decoder(..., allow_unsafe=True)" in message and ".decode(..., allow_unsafe=True)" in message
    assert "arbitrary code" in message
    assert (info.value.url, info.value.key, info.value.field) == ("u.tar", "k", ext)
    assert isinstance(info.value, DecodeError)
    assert Decoder(allow_unsafe=True)({ext: data}) == {ext: {"a": 1}}
    assert decode_field(ext, data, allow_unsafe=True) == {"a": 1}


def test_unpickling_never_runs_without_opt_in(monkeypatch):
    calls = []
    monkeypatch.setattr(pickle, "loads", lambda data: calls.append(data))
    with pytest.raises(UnsafeDecodeError):
        Decoder()({"pyd": b"anything"})
    assert calls == []


class Custom:
    def __eq__(self, other):
        return type(other) is Custom


def test_pth_weights_only_by_default_full_load_needs_opt_in():
    torch = pytest.importorskip("torch")
    plain = encode_field("pth", {"w": torch.arange(3)})
    assert Decoder()({"pth": plain})["pth"]["w"].tolist() == [0, 1, 2]
    custom = encode_field("pth", Custom())
    with pytest.raises(UnsafeDecodeError) as info:
        Decoder()({"__key__": "k", "pth": custom})
    assert "allow_unsafe=True" in str(info.value) and "Custom" in str(info.value)
    assert info.value.field == "pth" and info.value.key == "k"
    assert Decoder(allow_unsafe=True)({"pth": custom})["pth"] == Custom()


def test_corrupt_pth_is_a_plain_decode_error():
    pytest.importorskip("torch")
    with pytest.raises(DecodeError) as info:
        Decoder()({"pth": b"not a checkpoint at all"})
    assert info.value.__cause__ is not None


# ---- user handlers ----------------------------------------------------------------------------------------


def test_handlers_get_dotted_key_and_first_non_none_wins():
    seen = []

    def first(key, data):
        seen.append(("first", key))
        return "first" if key.endswith(".png") else None

    def second(key, data):
        seen.append(("second", key))
        return "second"

    out = Decoder(first, second)({"png": b"x", "seg.jpg": b"y", "cls": b"1"})
    assert out == {"png": "first", "seg.jpg": "second", "cls": "second"}
    assert ("first", ".seg.jpg") in seen and ("second", ".png") not in seen


def test_handlers_run_before_the_table_and_fall_through_to_it():
    d = Decoder(lambda key, data: None)
    assert d({"cls": b"3", "txt": b"t"}) == {"cls": 3, "txt": "t"}
    d = Decoder(lambda key, data: "mine" if key == ".cls" else None)
    assert d({"cls": b"3", "txt": b"t"}) == {"cls": "mine", "txt": "t"}


def test_handler_list_argument_like_webdataset():
    assert Decoder([handle_extension("cls", lambda b: -1)])({"cls": b"3"}) == {"cls": -1}


def test_handle_extension_multi_part_and_lists():
    d = Decoder(handle_extension("seg.jpg", lambda b: "mask"), handle_extension("jpg jpeg", lambda b: "img"))
    out = d({"jpg": b"", "seg.jpg": b"", "JPEG": b"", "left.seg.jpg": b"", "png": b"p"})
    assert out == {"jpg": "img", "seg.jpg": "mask", "JPEG": "img", "left.seg.jpg": "mask", "png": b"p"}


def test_handle_extension_leading_dot_anchors_like_webdataset():
    h = handle_extension(".png", lambda b: "x")
    assert h(".png", b"") == "x"
    assert h(".seg.png", b"") is None
    assert Decoder(h)({"png": b"", "seg.png": b""}) == {"png": "x", "seg.png": b""}


def test_handle_extension_returning_none_continues():
    d = Decoder(handle_extension("json", lambda b: None))
    assert d({"json": b"[1]"}) == {"json": [1]}


def test_image_spec_position_in_chain():
    png = encode_field("png", np.zeros((1, 1), np.uint8))
    grab = handle_extension("png", lambda b: "custom")
    assert Decoder(grab, "l8")({"png": png})["png"] == "custom"
    assert Decoder("l8", grab)({"png": png})["png"].shape == (1, 1)


def test_continue_from_a_user_handler_reaches_later_handlers_and_table():
    def unwrap(key, data):
        if key.endswith(".b64"):
            import base64

            return Continue(key[:-4], base64.b64decode(data))
        return None

    assert Decoder(unwrap)({"json.b64": b"WzFd", "cls": b"2"}) == {"json.b64": [1], "cls": 2}


def test_gzfilter_handler_compatible():
    result = gzfilter(".txt.gz", gzip.compress(b"x"))
    assert isinstance(result, Continue) and (result.key, result.data) == (".txt", b"x")
    assert gzfilter(".txt", b"x") is None


def test_bad_handlers_and_specs_are_config_errors():
    with pytest.raises(ConfigError, match="valid specs"):
        Decoder("nope")
    with pytest.raises(ConfigError):
        Decoder(42)  # type: ignore[arg-type]


# ---- errors -----------------------------------------------------------------------------------------------


def test_decode_error_context_and_cause():
    with pytest.raises(DecodeError) as info:
        Decoder()({"__key__": "sample-7", "__url__": "s3://b/shard-3.tar", "cls": b"three"})
    e = info.value
    assert (e.url, e.key, e.field) == ("s3://b/shard-3.tar", "sample-7", "cls")
    for part in ("s3://b/shard-3.tar", "sample-7", "'cls'", "ValueError"):
        assert part in str(e)
    assert isinstance(e.__cause__, ValueError)
    assert isinstance(e, ValueError)


def test_handler_exception_is_wrapped_with_context():
    def broken(key, data):
        raise KeyError("boom")

    with pytest.raises(DecodeError) as info:
        Decoder(broken)({"__key__": "k", "x": b""})
    assert info.value.field == "x" and isinstance(info.value.__cause__, KeyError)


def test_gz_inner_error_names_inner_codec():
    with pytest.raises(DecodeError, match=r"\.json data as json \(after gunzip\)") as info:
        Decoder()({"__key__": "k", "a.json.gz": gzip.compress(b"{bad")})
    assert isinstance(info.value.__cause__, json.JSONDecodeError)


def test_non_bytes_values_partial():
    sample = {"__key__": "k", "cls": 3, "txt": b"t"}
    with pytest.raises(DecodeError, match="partial=True"):
        Decoder()(sample)
    assert Decoder(partial=True)(sample) == {"__key__": "k", "cls": 3, "txt": "t"}
    assert Decoder()({"txt": bytearray(b"a"), "cls": memoryview(b"5")}) == {"txt": "a", "cls": 5}


def test_only():
    sample = {"__key__": "k", "cls": b"1", "txt": b"t", "json": b"[]"}
    assert Decoder(only=["cls", "json"])(sample) == {"__key__": "k", "cls": 1, "txt": b"t", "json": []}
    assert Decoder(only="txt")(sample) == {"__key__": "k", "cls": b"1", "txt": "t", "json": b"[]"}
    assert Decoder(only=["cls"])({"cls": b"1", "txt": 5}) == {"cls": 1, "txt": 5}


def test_missing_optional_dependency_is_not_a_decode_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_torchvision(name, *args, **kwargs):
        if name.startswith("torchvision") or name.startswith("torchaudio"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torchvision)
    for handler, field, module in [(torch_video, "mp4", "torchvision"), (torch_audio, "flac", "torchaudio")]:
        with pytest.raises(MissingDependencyError, match="pip install 'shardstream\\[") as info:
            Decoder(handler)({"__key__": "k", field: b"..."})
        assert info.value.module == module
        assert Decoder(handler)({"cls": b"1"}) == {"cls": 1}  # other fields untouched


def test_missing_cbor_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cbor2", None)
    with pytest.raises(MissingDependencyError, match=r"shardstream\[cbor\]"):
        Decoder()({"cbor": b"\xa0"})


# ---- columns, pickling, caching ---------------------------------------------------------------------------


def test_decode_columns_equals_per_sample_decoding():
    samples = [{"__key__": f"k{i}", "txt": f"t{i}".encode(), "cls": str(i).encode()} for i in range(5)]
    columns = {k: [s[k] for s in samples] for k in samples[0]}
    d = Decoder()
    out = d.decode_columns(columns)
    per_sample = [d(s) for s in samples]
    assert out == {k: [s[k] for s in per_sample] for k in samples[0]}


def test_decode_columns_errors_name_the_row():
    columns = {"__key__": ["a", "b"], "__url__": ["u", "u"], "cls": [b"1", b"x"]}
    with pytest.raises(DecodeError) as info:
        Decoder().decode_columns(columns)
    assert (info.value.key, info.value.field, info.value.url) == ("b", "cls", "u")
    with pytest.raises(DecodeError, match="partial"):
        Decoder().decode_columns({"cls": [b"1", 2]})


def test_decoder_pickles_and_keeps_working():
    d = Decoder(handle_extension("seg.png", len), "l8", only=["cls", "seg.png"], allow_unsafe=True)
    d({"cls": b"1"})
    d2 = pickle.loads(pickle.dumps(d))
    assert d2({"cls": b"1", "seg.png": b"abc", "txt": b"t"}) == {"cls": 1, "seg.png": 3, "txt": b"t"}
    assert d2.allow_unsafe and "only=" in repr(d2)


def test_decode1_and_decode_aliases():
    d = Decoder()
    assert d.decode1("cls", b"9") == 9
    assert d.decode({"txt": b"x"}) == {"txt": "x"}
    with pytest.raises(DecodeError) as info:
        d.decode1("json", b"{")
    assert info.value.field == "json"


def test_decoder_applied_to_a_dataset_decodes_each_sample():
    """webdataset's README form ``wds.Decoder(handler, ...)(dataset)``."""
    samples = [{"__key__": "a", "cls": b"1"}, {"__key__": "b", "cls": b"2"}]
    assert [s["cls"] for s in Decoder()(samples)] == [1, 2]
    with pytest.raises(TypeError, match="sample dict"):
        Decoder()(42)
