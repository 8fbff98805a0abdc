"""Stream files (msgpack, CBOR, JSON lines): round trips, truncation and corruption name file, record, offset."""

from __future__ import annotations

import io

import pytest

from shardstream.errors import ConfigError, RecordFormatError
from shardstream.streams import CHUNK, RecordWriter, format_of, iter_records

FORMATS = ["msgpack", "cbors", "jsonl"]
RECORDS = [{"i": i, "text": "x" * (i % 50), "tags": [i, i + 1]} for i in range(300)] + [[1, "a"], "plain", 3.5]


def encoded(fmt: str, records=RECORDS) -> bytes:
    buffer = io.BytesIO()
    with RecordWriter(buffer, fmt) as writer:
        for record in records:
            writer.write(record)
    assert writer.count == len(records)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip(fmt):
    assert list(iter_records(io.BytesIO(encoded(fmt)), fmt)) == RECORDS


@pytest.mark.parametrize("fmt", FORMATS)
def test_records_across_chunk_boundaries(fmt):
    records = [{"blob": "y" * 70_000, "n": n} for n in range(40)]  # 2.8 MB: several CHUNKs
    data = encoded(fmt, records)
    assert len(data) > 2 * CHUNK
    assert list(iter_records(io.BytesIO(data), fmt)) == records


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_file_names_file_and_record(fmt):
    data = encoded(fmt)
    got = []
    with pytest.raises(RecordFormatError) as info:
        for record in iter_records(io.BytesIO(data[:-2]), fmt, url="part-7." + fmt):
            got.append(record)
    assert got == RECORDS[:-1]  # every whole record before the cut was read
    err = info.value
    assert err.url == "part-7." + fmt and err.record == len(RECORDS) - 1 and err.offset > 0
    assert "part-7" in str(err) and f"record {len(RECORDS) - 1}" in str(err)


@pytest.mark.parametrize("fmt", FORMATS)
def test_corrupt_record_is_an_error_with_its_number(fmt):
    data = bytearray(encoded(fmt))
    data[200:203] = b"\xc1\xff\xc1"
    with pytest.raises(RecordFormatError) as info:
        list(iter_records(io.BytesIO(bytes(data)), fmt, url="bad"))
    assert 0 < info.value.record < len(RECORDS) and info.value.offset <= 200


DEEP = {"msgpack": b"\x91" * 100_000 + b"\xc0", "cbors": b"\x81" * 100_000 + b"\xf6",
        "jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_record_nested_too_deeply_is_a_record_error(fmt):
    # the records before it are read; the deep one is a RecordFormatError naming it (JSON lines: was a bare
    # RecursionError out of json.loads)
    data = encoded(fmt, [1, "two"]) + DEEP[fmt] + encoded(fmt, [3])
    got = []
    with pytest.raises(RecordFormatError) as info:
        for record in iter_records(io.BytesIO(data), fmt, url="deep." + fmt):
            got.append(record)
    assert got == [1, "two"]
    assert info.value.record == 2 and info.value.url == "deep." + fmt


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_record_larger_than_the_limit_is_refused(fmt):
    data = encoded(fmt, [{"blob": "z" * 5000}])
    with pytest.raises(RecordFormatError, match="max_record"):
        list(iter_records(io.BytesIO(data), fmt, max_record=1000))


def test_writer_to_a_path_is_atomic(tmp_path):
    path = tmp_path / "out.jsonl"
    with pytest.raises(RuntimeError):
        with RecordWriter(path) as writer:
            writer.write({"a": 1})
            raise RuntimeError("interrupted")
    assert not path.exists() and list(tmp_path.iterdir()) == []
    with RecordWriter(path) as writer:
        writer.write({"a": 1})
    assert path.read_bytes() == b'{"a": 1}\n'


def test_format_of_and_unknown_formats():
    assert format_of("x.msgpack") == "msgpack" and format_of("X.NDJSON") == "jsonl"
    with pytest.raises(ConfigError, match="stream-file ending"):
        format_of("x.tar")
    with pytest.raises(ConfigError, match="unknown stream format"):
        list(iter_records(io.BytesIO(b""), "xml"))
    with pytest.raises(ConfigError, match="cannot be written"):
        RecordWriter(io.BytesIO(), "jsonl").write({1, 2})


def test_blank_lines_in_jsonl_are_skipped_and_records_numbered_by_line():
    data = b'{"a": 1}\n\n{"a": 2}\n{"a": \n'
    with pytest.raises(RecordFormatError) as info:
        list(iter_records(io.BytesIO(data), "jsonl"))
    assert info.value.record == 3
