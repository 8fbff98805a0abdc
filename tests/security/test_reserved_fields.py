"""Issue 18, item 10: a member named ``KEY.__url__`` (or ``KEY.__key__``) never overwrites the sample's metadata.

It raises :class:`ReservedFieldError` (a SampleFormatError naming shard, key and member), or is skipped under a
skipping handler, by every reader: the C grouping, the Python one, random access indexes. Other ``__*__``
extensions stay ordinary fields (``shardstream shuffle`` round-trips ``__origkey__`` members).
"""

from __future__ import annotations

import io

import pytest

from shardstream.errors import ReservedFieldError, SampleFormatError
from shardstream.indexed import index_shard
from shardstream.pipeline import ignore_and_continue
from shardstream.samples import SampleStats, iter_samples
from shardstream.tar import TarStreamWriter
from shardstream.writer import TarWriter


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with TarStreamWriter(out) as tw:
        for name, data in members:
            tw.add(name, data)
    return out.getvalue()


@pytest.mark.parametrize("accelerate", [False, True])
@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("reserved", ["__url__", "__key__"])
def test_a_reserved_member_raises(accelerate, first, reserved):
    members = [(f"a.{reserved}", b"http://evil"), ("a.txt", b"x")]
    data = _tar((members if first else members[::-1]) + [("b.txt", b"y")])
    with pytest.raises(ReservedFieldError) as info:
        list(iter_samples(io.BytesIO(data), "s.tar", accelerate=accelerate))
    error = info.value
    assert isinstance(error, SampleFormatError)
    assert (error.url, error.key, error.member) == ("s.tar", "a", f"a.{reserved}")
    assert "reserved" in str(error) and "'s.tar'" in str(error)


@pytest.mark.parametrize("accelerate", [False, True])
def test_a_skipping_handler_drops_only_the_member(accelerate):
    data = _tar([("a.__url__", b"http://evil"), ("a.txt", b"x"), ("b.__key__", b"z"), ("b.txt", b"y")])
    stats = SampleStats()
    samples = list(iter_samples(io.BytesIO(data), "s.tar", handler=ignore_and_continue, stats=stats,
                                accelerate=accelerate))  # fmt: skip
    assert samples == [{"__key__": "a", "__url__": "s.tar", "txt": b"x"}, {"__key__": "b", "__url__": "s.tar",
                                                                          "txt": b"y"}]
    assert stats.skipped_members == 2 and stats.reasons == {"ReservedFieldError": 2}


def test_indexing_applies_the_same_rule(tmp_path):
    shard = tmp_path / "s.tar"
    shard.write_bytes(_tar([("a.txt", b"x"), ("a.__url__", b"http://evil")]))
    with pytest.raises(ReservedFieldError):
        index_shard(str(shard))


def test_other_dunder_extensions_are_fields():
    data = _tar([("a.__origkey__", b"k7"), ("a.__odd__", b"o"), ("a.txt", b"x")])
    (sample,) = iter_samples(io.BytesIO(data), "s.tar")
    assert sample["__origkey__"] == b"k7" and sample["__odd__"] == b"o" and sample["__url__"] == "s.tar"


def test_the_writer_never_writes_the_readers_metadata():
    out = io.BytesIO()
    with TarWriter(out, keep_meta=True) as sink:
        sink.write({"__key__": "a", "__url__": "from-elsewhere.tar", "__origkey__": "k", "txt": "x"})
    (sample,) = iter_samples(io.BytesIO(out.getvalue()), "copy.tar")
    assert sample == {"__key__": "a", "__url__": "copy.tar", "__origkey__": b"k", "txt": b"x"}
