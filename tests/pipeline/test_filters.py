"""Per-sample stages and error handlers: every error and warning names shard, sample and field."""

from __future__ import annotations

import warnings

import pytest

from shardstream.errors import SampleFormatError
from shardstream.pipeline import (
    DataPipeline,
    decode,
    extract_keys,
    ignore_and_continue,
    ignore_and_stop,
    map,
    map_dict,
    map_tuple,
    rename,
    rename_keys,
    rsample,
    select,
    slice,
    to_tuple,
    warn_and_continue,
    warn_and_stop,
)
from shardstream.pipeline.error_handlers import PipelineWarning


def samples(n=4):
    return [{"__key__": f"k{i}", "__url__": "shard-0.tar", "txt": f"t{i}", "cls": i} for i in range(n)]


def test_map_drops_none_and_keeps_the_key():
    out = list(map(lambda s: None if s["cls"] == 1 else {"y": s["cls"]})(samples(3)))
    assert out == [{"y": 0, "__key__": "k0"}, {"y": 2, "__key__": "k2"}]


def test_map_error_carries_url_and_key_and_is_reraised_by_default():
    def boom(sample):
        raise KeyError("jpg")

    with pytest.raises(KeyError) as info:
        list(map(boom)(samples()))
    assert info.value.url == "shard-0.tar" and info.value.key == "k0"
    assert any("shard-0.tar" in note and "k0" in note for note in info.value.__notes__)


@pytest.mark.parametrize("handler,expected", [(ignore_and_continue, [0, 2, 3]), (ignore_and_stop, [0])])
def test_handlers_skip_or_stop(handler, expected):
    def f(sample):
        if sample["cls"] == 1:
            raise ValueError("bad")
        return sample["cls"]

    assert list(map(f, handler=handler)(samples())) == expected


def test_warnings_name_the_shard_the_sample_and_the_field():
    bad = samples(2)
    del bad[1]["txt"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = list(to_tuple("txt", "cls", handler=warn_and_continue)(bad))
    assert out == [("t0", 0)]
    (w,) = caught
    assert w.category is PipelineWarning
    text = str(w.message)
    assert "shard-0.tar" in text and "'k1'" in text and "'txt'" in text and "skipped" in text
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(to_tuple("txt", handler=warn_and_stop)(bad)) == [("t0",)]
    assert "stopping" in str(caught[0].message)


def test_to_tuple_missing_field_error_lists_available_fields():
    with pytest.raises(SampleFormatError) as info:
        list(to_tuple("jpg;png", "cls")(samples(1)))
    message = str(info.value)
    assert "'jpg' or 'png'" in message and "'txt'" in message and "'cls'" in message
    assert "shard-0.tar" in message and "'k0'" in message
    assert info.value.field == "jpg;png" and info.value.key == "k0"


def test_to_tuple_hints_at_the_key_rule_for_dotted_names():
    sample = {"__key__": "235342 Track 2", "__url__": "m.tar", "0 (clean version).mp3": b""}
    with pytest.raises(SampleFormatError, match="last-dot"):
        list(to_tuple("mp3")([sample]))


def test_to_tuple_forms():
    s = [{"__key__": "k", "png": 1, "json": 2}]
    assert list(to_tuple("jpg;png json")(s)) == [(1, 2)]
    assert list(to_tuple("__key__", "jpg;png")(s)) == [("k", 1)]
    assert list(to_tuple("jpg", "json", missing_is_error=False)(s)) == [(None, 2)]


def test_map_tuple_map_dict_select_slice():
    assert list(map_tuple(None, lambda x: x * 2)([(1, 2, 3)])) == [(1, 4, 3)]
    assert [s["cls"] for s in map_dict(cls=lambda c: -c)(samples(2))] == [0, -1]
    assert [s["cls"] for s in select(lambda s: s["cls"] % 2)(samples())] == [1, 3]
    assert list(slice(2)(range(5))) == [0, 1]


def test_map_dict_error_names_the_field():
    with pytest.raises(ZeroDivisionError) as info:
        list(map_dict(cls=lambda c: 1 / c)(samples(1)))
    assert info.value.field == "cls" and info.value.key == "k0"


def test_rename_keep_and_drop():
    s = [{"__key__": "k", "png": 1, "cls": 2}]
    assert list(rename(image="jpg;png")(s)) == [{"__key__": "k", "cls": 2, "image": 1}]
    assert list(rename(image="png", keep=False)(s)) == [{"image": 1}]
    with pytest.raises(SampleFormatError):
        list(rename(image="jpg")(s))


def test_rename_keys_and_extract_keys():
    s = [{"__key__": "k", "seg.png": 1, "img.jpg": 2}]
    assert list(rename_keys(seg="*.png", img="*.jpg")(s)) == [{"seg": 1, "img": 2}]
    assert list(rename_keys(("seg", "*seg.png"))(s)) == [{"seg": 1}]
    with pytest.raises(SampleFormatError):
        list(rename_keys(x="*.gif")(s))
    assert list(extract_keys("*.jpg", "*.png")(s)) == [(2, 1)]
    assert list(extract_keys("*.gif", "*.png", ignore_missing=True)(s)) == [(1,)]
    with pytest.raises(SampleFormatError):
        list(extract_keys("*.p*;*.j*")(s))


def test_rsample_is_reproducible_per_epoch():
    p = DataPipeline(range(200), rsample(0.3))
    p.set_epoch(0)
    a = list(p)
    p.set_epoch(0)
    assert list(p) == a and 30 < len(a) < 90
    p.set_epoch(1)
    assert list(p) != a


def test_decode_with_handler_skips_undecodable_fields():
    raw = [{"__key__": "a", "__url__": "u.tar", "cls": b"1"}, {"__key__": "b", "__url__": "u.tar", "cls": b"x"},
           {"__key__": "c", "__url__": "u.tar", "json": b"{"}]
    assert [s["cls"] for s in decode(handler=ignore_and_continue)(raw)] == [1]
    with pytest.raises(ValueError) as info:
        list(decode()(raw))
    assert info.value.key == "b" and info.value.url == "u.tar" and info.value.field == "cls"
