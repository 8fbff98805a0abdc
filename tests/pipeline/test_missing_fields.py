"""A field a sample lacks: one typed error (MissingFieldError, a SampleFormatError and a ValueError) that names the
fields the sample has and the one probably meant, whichever stage asks and whichever speed the chain runs at."""

from __future__ import annotations

import pytest

import shardstream as wds
from shardstream.errors import MissingFieldError, SampleFormatError
from shardstream.pipeline import getfirst
from shardstream.tar import reader
from shardstream.testing import write_shards


@pytest.fixture(params=[True, False], ids=["c-walk", "python-walk"])
def shard(request, tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "USE_ACCELERATOR", request.param)
    return write_shards(tmp_path, [4], {"jpg": b"\xff\xd8image", "cls": 3})


@pytest.mark.parametrize("ask", [
    pytest.param(lambda ds: ds.to_tuple("jgp", "cls"), id="to_tuple"),
    pytest.param(lambda ds: ds.to_tuple("jgp", "cls").batched(2), id="to_tuple-batched (fused)"),
    pytest.param(lambda ds: ds.to_tuple("jgp;jpeg", "cls"), id="alternatives"),
    pytest.param(lambda ds: ds.rename(image="jgp"), id="rename"),
    pytest.param(lambda ds: ds.decode().to_tuple("JPG", "cls"), id="other-case"),
])
def test_a_misspelt_field_names_the_closest_one(shard, ask):
    with pytest.raises(MissingFieldError) as caught:
        next(iter(ask(wds.WebDataset(shard, shardshuffle=False))))
    error = caught.value
    assert isinstance(error, SampleFormatError) and isinstance(error, ValueError)
    assert error.suggestion == "jpg" and "(did you mean 'jpg'?)" in str(error)
    assert "its fields: 'cls', 'jpg'" in str(error) and set(error.fields) == {"jpg", "cls"}
    assert shard[0] in str(error) and "fix the shard" not in str(error)


def test_a_field_with_a_prefix_is_suggested_whole():
    """A converter that named the fields after its columns (``file.jpg``): the field to ask for is that name,
    not another key rule (``keys='last-dot'`` would split every sample in two)."""
    with pytest.raises(MissingFieldError) as caught:
        getfirst({"__key__": "k", "file.jpg": b"..", "label.txt": b"3"}, "jpg")
    assert caught.value.suggestion == "file.jpg"
    assert "last-dot" not in str(caught.value)


def test_a_basename_with_dots_suggests_the_key_rule():
    with pytest.raises(MissingFieldError) as caught:
        getfirst({"__key__": "song 2", "0 (clean).mp3": b"..", "0 (clean).json": b"{}"}, "mp3")
    assert caught.value.suggestion is None
    assert "try keys='last-dot'" in str(caught.value) and "did you mean" not in str(caught.value)


def test_nothing_close_suggests_nothing():
    with pytest.raises(MissingFieldError) as caught:
        getfirst({"__key__": "k", "txt": b"..", "cls": b"1"}, "npy")
    assert caught.value.suggestion is None and "did you mean" not in str(caught.value)
    assert "its fields: 'txt', 'cls'" in str(caught.value)


def test_a_skipping_handler_still_skips(shard):
    ds = wds.WebDataset(shard, shardshuffle=False).to_tuple("jgp", "cls", handler=wds.ignore_and_continue)
    assert list(ds) == []
