"""TFRecord files of ``tf.train.Example`` records, read without TensorFlow (nor protobuf).

A TFRecord file is a sequence of records ``uint64 length, uint32 masked CRC32C of the length, data,
uint32 masked CRC32C of the data`` (little-endian), optionally gzip-compressed as a whole (``.gz`` or the
gzip signature). Both checksums are verified: a mismatch or a file that ends inside a record raises
:class:`~shardstream.errors.RecordFormatError` naming the file and the record's offset.

An ``Example`` is parsed from the protobuf wire format: ``features`` (field 1) holds a map from feature name
to ``Feature``, one of ``bytes_list`` (1), ``float_list`` (2) or ``int64_list`` (3), packed or not. Each
feature becomes a field by :func:`~shardstream.convert.fields.column_field`: a single bytes value keeps its
bytes (``image/encoded`` -> ``image_encoded.jpg``; ``/`` cannot be in a field name), a single int ``cls``, a
single float or several values ``json`` (several byte strings: a JSON list when they are text, else
MessagePack ``msgpack``).

>>> record = b"\\x0a\\x10\\x0a\\x0e\\x0a\\x05label\\x12\\x05\\x1a\\x03\\x0a\\x01\\x07"  # {"label": int64_list [7]}
>>> parse_example(record)
{'label': [7]}
>>> framed = frame_record(record)
>>> [parse_example(r) for _, r in iter_records(__import__("io").BytesIO(framed * 2))]
[{'label': [7]}, {'label': [7]}]
>>> list(iter_records(__import__("io").BytesIO(framed[:-1] + b"!"), "bad.tfrecord"))
Traceback (most recent call last):
...
shardstream.errors.RecordFormatError: record data CRC mismatch (shard 'bad.tfrecord', offset 0); the file is corrupt or truncated: re-download or re-export it
"""

from __future__ import annotations

import dataclasses
import gzip
import struct
from collections.abc import Callable, Iterator
from typing import IO, Any

from ..codecs.basic import msgpack_dumps
from ..errors import RecordFormatError
from ..io import open_url
from ..process import Skip
from .fields import column_field, safe_key

__all__ = ["TFRecordSource", "crc32c", "frame_record", "iter_records", "parse_example"]

_MASK_DELTA = 0xA282EAD8


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def _crc32c_python(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_crc32c_fast: Callable[[bytes], int] | None
try:  # the C implementation where installed (a dependency of several packages); same results
    from crc32c import crc32c as _crc32c_fast
except ImportError:  # pragma: no cover - depends on the environment
    _crc32c_fast = None


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    return _crc32c_fast(data) if _crc32c_fast is not None else _crc32c_python(data)


def _masked(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One record in TFRecord framing (for writing test files and for tools)."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked(length)) + data + struct.pack("<I", _masked(data))


def _read(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if len(data) == n or not data:
        return data
    parts = [data]
    while sum(map(len, parts)) < n:
        more = stream.read(n - sum(map(len, parts)))
        if not more:
            break
        parts.append(more)
    return b"".join(parts)


def iter_records(stream: IO[bytes], url: str = "<stream>", *, check_crc: bool = True) -> Iterator[tuple[int, bytes]]:
    """``(offset, record bytes)`` for each record of an (uncompressed) TFRecord stream, checksums verified."""
    offset = 0
    while True:
        head = _read(stream, 12)
        if not head:
            return
        if len(head) < 12:
            raise RecordFormatError("the file ends inside a record header", url=url, offset=offset)
        (length,), (crc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
        if check_crc and _masked(head[:8]) != crc:
            raise RecordFormatError("record length CRC mismatch", url=url, offset=offset)
        data = _read(stream, length + 4)
        if len(data) < length + 4:
            raise RecordFormatError("the file ends inside a record", url=url, offset=offset)
        record, (crc,) = data[:length], struct.unpack("<I", data[length:])
        if check_crc and _masked(record) != crc:
            raise RecordFormatError("record data CRC mismatch", url=url, offset=offset)
        yield offset, record
        offset += 16 + length


# -- protobuf wire format ---------------------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """``(field number, wire type, value)``: ints for varints, bytes for length-delimited and fixed fields."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
            if pos > end:
                raise ValueError("length-delimited field runs past the end")
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


def _feature(buf: bytes) -> list[Any]:
    for kind, _, inner in _fields(buf):
        values: list[Any] = []
        for number, wire, value in _fields(inner):
            if number != 1:
                continue
            if kind == 1:
                values.append(bytes(value))
            elif kind == 2:
                values.extend(struct.unpack(f"<{len(value) // 4}f", value) if wire == 2 else
                              struct.unpack("<f", value))  # fmt: skip
            elif kind == 3:
                if wire == 2:
                    pos = 0
                    while pos < len(value):
                        n, pos = _varint(value, pos)
                        values.append(_signed(n))
                else:
                    values.append(_signed(value))
        return values
    return []


def parse_example(record: bytes) -> dict[str, list[Any]]:
    """The features of a serialized ``tf.train.Example``: name -> list of bytes, floats or ints."""
    features: dict[str, list[Any]] = {}
    for number, _, body in _fields(record):
        if number != 1:
            continue
        for entry_number, _, entry in _fields(body):
            if entry_number != 1:
                continue
            name, value = "", b""
            for n, _, v in _fields(entry):
                if n == 1:
                    name = bytes(v).decode("utf-8")
                elif n == 2:
                    value = v
            features[name] = _feature(value)
    return features


def _feature_field(name: str, values: list[Any]) -> tuple[str, bytes] | None:
    column = name.replace("/", "_")
    if not values:
        return None
    if len(values) == 1:
        return column_field(column, values[0])
    if isinstance(values[0], bytes):
        try:
            return column_field(column, [v.decode("utf-8") for v in values])
        except UnicodeDecodeError:
            return f"{column}.msgpack", msgpack_dumps(values)
    return column_field(column, values)


@dataclasses.dataclass(frozen=True)
class TFRecordSource:
    """The ``tf.train.Example`` records of one TFRecord file (gzip-compressed or not), one sample each; the key is
    the ``key`` feature where given, else ``FILESTEM-RECORDNUMBER``."""

    url: str
    key: str | None = None
    compression: str | None = None  # None: by the ``.gz`` suffix or the gzip signature; "gzip"; "none"

    def describe(self) -> str:
        return f"tfrecord {self.url} key={self.key} compression={self.compression}"

    def samples(self) -> Iterator[dict[str, Any] | Skip]:
        stem = self.url.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
        raw = open_url(self.url)
        try:
            stream: IO[bytes] = raw
            head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
            if self.compression == "gzip" or (self.compression is None and (self.url.endswith(".gz") or head == b"\x1f\x8b")):
                stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
            for number, (offset, record) in enumerate(iter_records(stream, self.url)):
                try:
                    features = parse_example(record)
                except (ValueError, IndexError, UnicodeDecodeError, struct.error) as e:
                    yield Skip(f"{stem}-{number:08d}", f"record at offset {offset} is not a tf.train.Example: {e}")
                    continue
                key_value = features.get(self.key or "__key__")
                key = key_value[0].decode("utf-8") if key_value and isinstance(key_value[0], bytes) else (
                    str(key_value[0]) if key_value else f"{stem}-{number:08d}")  # fmt: skip
                sample: dict[str, Any] = {"__key__": safe_key(key)}
                for name, values in sorted(features.items()):
                    got = _feature_field(name, values)
                    if got is not None:
                        sample[got[0]] = got[1]
                yield sample if len(sample) > 1 else Skip(sample["__key__"], "the record has no features")
        finally:
            raw.close()
