"""The TFRecord reader's pieces: CRC32C (C and pure Python agree), framing, truncation, protobuf encodings."""

from __future__ import annotations

import io
import struct

import pytest

from shardstream.convert import tfrecord
from shardstream.errors import RecordFormatError


def test_crc32c_pure_python_matches_the_reference_values():
    assert tfrecord._crc32c_python(b"123456789") == 0xE3069283
    assert tfrecord._crc32c_python(b"") == 0
    data = bytes(range(256)) * 3
    assert tfrecord._crc32c_python(data) == tfrecord.crc32c(data)


def test_truncated_files_and_bad_length_crc_are_typed_errors():
    framed = tfrecord.frame_record(b"payload")
    with pytest.raises(RecordFormatError, match="ends inside a record"):
        list(tfrecord.iter_records(io.BytesIO(framed + framed[:-3]), "t.tfrecord"))
    with pytest.raises(RecordFormatError, match="ends inside a record header"):
        list(tfrecord.iter_records(io.BytesIO(framed[:5]), "t.tfrecord"))
    broken = framed[:8] + bytes(4) + framed[12:]
    with pytest.raises(RecordFormatError, match="length CRC") as info:
        list(tfrecord.iter_records(io.BytesIO(framed + broken), "t.tfrecord"))
    assert info.value.offset == len(framed) and info.value.url == "t.tfrecord"


def _len(field: int, body: bytes) -> bytes:
    return bytes([field << 3 | 2, len(body)]) + body


def test_unpacked_ints_negative_values_and_floats():
    ints = bytes([0x08, 0x05]) + bytes([0x08]) + b"\xff" * 9 + b"\x01"  # unpacked int64 [5, -1]
    floats = _len(1, struct.pack("<2f", 1.5, -2.0))
    features = _len(1, _len(1, b"n") + _len(2, _len(3, ints))) + _len(1, _len(1, b"f") + _len(2, _len(2, floats)))
    assert tfrecord.parse_example(_len(1, features)) == {"n": [5, -1], "f": [1.5, -2.0]}
