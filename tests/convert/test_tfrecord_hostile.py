"""The TFRecord reader under hostile input: lying lengths, broken gzip, Examples of the wrong shape. Whatever the
bytes, the outcome is records or a RecordFormatError naming the file and the offset, with memory bounded by the
bytes really there."""

from __future__ import annotations

import gzip
import io
import random
import struct
import tracemalloc

import pytest

from shardstream.convert import convert, tfrecord
from shardstream.convert.tfrecord import TFRecordSource, frame_record, iter_records
from shardstream.errors import RecordFormatError
from shardstream.process import Skip


def _len(field: int, body: bytes) -> bytes:
    """A length-delimited protobuf field (bodies under 128 bytes)."""
    return bytes([field << 3 | 2, len(body)]) + body


def _example(name: bytes, feature: bytes) -> bytes:
    """An Example of one feature ``name`` whose ``Feature`` message is ``feature``."""
    return _len(1, _len(1, _len(1, name) + _len(2, feature)))


def _header(length: int) -> bytes:
    """A record header claiming ``length`` bytes, with a valid length CRC."""
    head = struct.pack("<Q", length)
    return head + struct.pack("<I", tfrecord._masked(head))


GOOD = frame_record(_example(b"label", _len(3, _len(1, b"\x07"))))


@pytest.mark.parametrize("length", [2**31, 2**40, 2**64 - 1])  # the cap: 2**31 - 1
def test_a_length_over_the_cap_is_a_record_format_error_at_its_offset(length):
    data = GOOD + _header(length) + b"a few bytes"
    with pytest.raises(RecordFormatError, match="over the") as info:
        list(iter_records(io.BytesIO(data), "big.tfrecord"))
    assert info.value.offset == len(GOOD) and info.value.url == "big.tfrecord"


def test_a_huge_length_in_a_file_is_a_record_format_error_not_a_memory_error(tmp_path):
    path = tmp_path / "huge.tfrecord"
    path.write_bytes(GOOD + _header(2**40) + b"a few bytes")
    with pytest.raises(RecordFormatError, match="over the") as info:
        list(TFRecordSource(str(path)).samples())
    assert info.value.offset == len(GOOD) and info.value.url == str(path)


def test_a_length_past_the_end_of_a_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "short.tfrecord"
    path.write_bytes(GOOD + _header(1 << 30) + b"a few bytes")
    with pytest.raises(RecordFormatError, match="runs past the") as info:
        list(TFRecordSource(str(path)).samples())
    assert info.value.offset == len(GOOD) and "short.tfrecord" in str(info.value)


def test_a_lying_length_in_a_gzip_stream_costs_only_the_bytes_there(tmp_path):
    """A stream whose size is unknown is read in growing steps: a length of 256 MiB over 11 bytes of data does not
    allocate 256 MiB (a buffered ``read(n)`` allocates ``n`` first)."""
    path = tmp_path / "lying.tfrecord.gz"
    path.write_bytes(gzip.compress(GOOD + _header(256 << 20) + b"a few bytes"))
    tracemalloc.start()
    try:
        with pytest.raises(RecordFormatError, match="ends inside a record") as info:
            list(TFRecordSource(str(path)).samples())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.offset == len(GOOD)
    assert peak < 32 << 20, f"peak {peak:,} bytes"


def test_long_records_of_a_gzip_stream_read_whole(tmp_path):
    records = [bytes(range(256)) * (9000 * n + 1) for n in range(4)]  # up to ~7 MB: several growing steps
    stream = gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(b"".join(map(frame_record, records)))))
    assert [r for _, r in iter_records(stream, "long.tfrecord.gz")] == records


@pytest.mark.parametrize("data", [b"\x1f\x8b\x08\x00garbage after a gzip header", gzip.compress(GOOD * 3)[:-12]],
                         ids=["garbage", "truncated"])
def test_broken_gzip_is_a_record_format_error(tmp_path, data):
    path = tmp_path / "broken.tfrecord.gz"
    path.write_bytes(data)
    with pytest.raises(RecordFormatError, match="cannot decompress") as info:
        list(TFRecordSource(str(path)).samples())
    assert info.value.url == str(path)


# wrong wire types: each would otherwise allocate (bytes(n) of a varint), crash with a TypeError, or read past
WRONG_SHAPES = {
    "bytes value as a varint": _example(b"x", _len(1, b"\x08\x80\x80\x40")),  # bytes_list [varint 2**20]
    "int64 value as fixed64": _example(b"x", _len(3, b"\x09" + bytes(8))),
    "float value as a varint": _example(b"x", _len(2, b"\x08\x01")),
    "packed floats of 5 bytes": _example(b"x", _len(2, _len(1, bytes(5)))),
    "feature name as a varint": _len(1, _len(1, b"\x08\x80\x80\x40")),
    "features as a varint": b"\x08\x80\x80\x40",
    "truncated fixed32": _example(b"x", _len(2, b"\x0d\x00")),
    "truncated varint": b"\x08\x80",
    "name not UTF-8": _example(b"\xff", _len(3, _len(1, b"\x07"))),
}


@pytest.mark.parametrize("record", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_records_that_are_not_examples_are_record_format_errors(record):
    with pytest.raises(RecordFormatError, match="not a tf.train.Example"):
        tfrecord.parse_example(record)


def test_a_parse_error_names_the_file_and_offset_given():
    with pytest.raises(RecordFormatError, match="not a tf.train.Example") as info:
        tfrecord.parse_example(b"\x08\x80", url="x.tfrecord", offset=32)
    assert info.value.offset == 32 and info.value.url == "x.tfrecord"


def test_a_task_skips_records_that_are_not_examples_and_keeps_the_rest(tmp_path):
    path = tmp_path / "mixed.tfrecord"
    path.write_bytes(b"".join(map(frame_record, [*WRONG_SHAPES.values(), GOOD[12:-4]])))
    items = list(TFRecordSource(str(path)).samples())
    skips = [item for item in items if isinstance(item, Skip)]
    assert len(skips) == len(WRONG_SHAPES) and all("not a tf.train.Example" in s.reason for s in skips)
    assert items[-1] == {"__key__": f"mixed-{len(WRONG_SHAPES):08d}", "cls": b"7"}


def test_a_key_feature_that_is_not_utf8_skips_its_record(tmp_path):
    path = tmp_path / "keys.tfrecord"
    path.write_bytes(frame_record(_example(b"id", _len(1, _len(1, b"\xff\xfe")))) + GOOD)
    result = convert(str(path), str(tmp_path / "out"), key="id", engine="inline")
    assert result.samples == 1
    [(_, skip)] = result.skipped
    assert skip.key == "keys-00000000" and "'id'" in skip.reason and "UTF-8" in skip.reason


def test_read_examples_takes_whole_files_plain_or_gzip():
    assert tfrecord.read_examples(GOOD * 2) == [{"label": [7]}] * 2
    assert tfrecord.read_examples(gzip.compress(GOOD)) == [{"label": [7]}]
    with pytest.raises(RecordFormatError, match="CRC"):
        tfrecord.read_examples(GOOD[:-1] + b"!")


def test_mutated_files_give_examples_or_a_record_format_error():
    """The fuzz target's contract on a seeded sample of mutations (checksums off, so that mutated records reach the
    Example parser): nothing but RecordFormatError comes out."""
    seed = b"".join(map(frame_record, [_example(b"image/encoded", _len(1, _len(1, b"\xff\xd8\xff" * 9))),
                                       _example(b"f", _len(2, _len(1, struct.pack("<2f", 1, 2)))),
                                       GOOD[12:-4]]))  # fmt: skip
    rng = random.Random(7)
    outcomes = set()
    for _ in range(3000):
        data = bytearray(seed if rng.random() < 0.8 else gzip.compress(seed))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at : at + rng.randint(1, 3)] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 3)))
        try:
            tfrecord.read_examples(bytes(data), check_crc=False, max_record=1 << 16)
            outcomes.add("ok")
        except RecordFormatError:
            outcomes.add("error")
    assert outcomes == {"ok", "error"}
