"""TFRecord files of ``tf.train.Example`` records, read without TensorFlow (nor protobuf).

A TFRecord file is a sequence of records ``uint64 length, uint32 masked CRC32C of the length, data,
uint32 masked CRC32C of the data`` (little-endian), optionally gzip-compressed as a whole (``.gz`` or the
gzip signature). Both checksums are verified: a mismatch or a file that ends inside a record raises
:class:`~shardstream.errors.RecordFormatError` naming the file and the record's offset.

An ``Example`` is parsed from the protobuf wire format: ``features`` (field 1) holds a map from feature name
to ``Feature``, one of ``bytes_list`` (1), ``float_list`` (2) or ``int64_list`` (3), packed or not. Each
feature becomes a field by the rule of :mod:`~shardstream.convert.fields` (``/`` cannot be in a field name:
``image/encoded`` is the column ``image_encoded``): a single bytes value keeps its bytes, named by its extension
alone when it is the record's one image/audio feature (``image/encoded`` -> ``jpg``), else ``COLUMN.EXT``; the
one label feature holding a single int (``image/class/label``) is ``cls``; another single int ``COLUMN.cls``,
a single float or several values ``COLUMN.json`` (several byte strings: a JSON list when they are text, else
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
import io
import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any

from ..codecs.basic import msgpack_dumps
from ..errors import RecordFormatError
from ..io import open_url
from ..process import Skip
from .fields import EXTENSION, LABEL, column_field, field_names, safe_key, sniff_extension

__all__ = ["MAX_RECORD", "TFRecordSource", "crc32c", "frame_record", "iter_records", "parse_example", "read_examples"]

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


def _installed_crc32c() -> Callable[[bytes], int] | None:
    """The C implementation where installed (a dependency of several packages; same results), else None."""
    try:
        from crc32c import crc32c  # noqa: PLC0415 - optional package, looked up once below
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return crc32c


_crc32c_fast = _installed_crc32c()


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


#: the longest record read, in bytes: a ``tf.train.Example`` is a protobuf message, which is at most 2 GiB - 1
#: long; a longer length (or one past the end of a file whose size is known) is a RecordFormatError at its offset
MAX_RECORD = (1 << 31) - 1
#: a record of a stream whose size is unknown (gzip, a pipe) is read in steps of at least this many bytes, each
#: at most the size of what is already read: a length that lies costs memory only for the bytes really there
_STEP = 1 << 20
_DECOMPRESS_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def _read(stream: IO[bytes], n: int, known: bool) -> bytes:
    """Up to ``n`` bytes (fewer only at the end of the stream). ``known``: the bytes are there (the file's size
    says so), read them at once; else read in growing steps (a buffered ``read(n)`` allocates ``n`` first)."""
    data = stream.read(n if known else min(n, _STEP))
    if len(data) == n or not data:
        return data
    parts, got = [data], len(data)
    while got < n:
        more = stream.read(n - got if known else min(n - got, max(got, _STEP)))
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _size(stream: IO[bytes]) -> int | None:
    """The size of ``stream`` when it is a regular file read from its start (so ``read(n)`` gets ``n`` bytes
    until its end), else None."""
    if isinstance(stream, gzip.GzipFile):
        return None
    try:
        info = os.fstat(stream.fileno())
        position = stream.tell()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return info.st_size - position if stat.S_ISREG(info.st_mode) else None


def iter_records(stream: IO[bytes], url: str = "<stream>", *, check_crc: bool = True, size: int | None = None,
                 max_record: int = MAX_RECORD) -> Iterator[tuple[int, bytes]]:
    """``(offset, record bytes)`` for each record of an (uncompressed) TFRecord stream, checksums verified.

    ``size``: the stream's length where known (by default that of a regular file); a record length past it, or
    over ``max_record``, is a :class:`~shardstream.errors.RecordFormatError` before anything is read, and a
    stream of unknown size costs memory only for the bytes it really holds (a gzip stream that decompresses to
    garbage). A failure to decompress is a RecordFormatError too.
    """
    if size is None:
        size = _size(stream)
    offset = 0
    try:
        while True:
            head = _read(stream, 12, True)
            if not head:
                return
            if len(head) < 12:
                raise RecordFormatError("the file ends inside a record header", url=url, offset=offset)
            (length,), (crc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
            if check_crc and _masked(head[:8]) != crc:
                raise RecordFormatError("record length CRC mismatch", url=url, offset=offset)
            if length > max_record:
                raise RecordFormatError(f"record length {length:,} is over the {max_record:,} bytes a record may have",
                                        url=url, offset=offset)  # fmt: skip
            if size is not None and length + 16 > size - offset:
                raise RecordFormatError(f"the file ends inside a record (its length {length:,} runs past the "
                                        f"{max(size - offset - 12, 0):,} bytes left)", url=url, offset=offset)  # fmt: skip
            data = _read(stream, length + 4, size is not None)
            if len(data) < length + 4:
                raise RecordFormatError("the file ends inside a record", url=url, offset=offset)
            record, (crc,) = data[:length], struct.unpack("<I", data[length:])
            if check_crc and _masked(record) != crc:
                raise RecordFormatError("record data CRC mismatch", url=url, offset=offset)
            yield offset, record
            offset += 16 + length
    except _DECOMPRESS_ERRORS as e:
        raise RecordFormatError(f"cannot decompress the file: {e}", url=url, offset=offset) from e


# -- protobuf wire format ---------------------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ValueError("a varint runs past the end")
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
            yield number, wire, value
            continue
        if wire == 2:
            size, pos = _varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos + size > end:
            raise ValueError(f"field {number} runs past the end")
        yield number, wire, buf[pos : pos + size]
        pos += size


def _expect(wire: int, wanted: int, what: str) -> None:
    if wire != wanted:
        raise ValueError(f"{what} has the wire type {wire}, not {wanted}")


def _signed(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


def _feature(buf: bytes) -> list[Any]:
    for kind, wire, inner in _fields(buf):
        values: list[Any] = []
        if kind in (1, 2, 3):
            _expect(wire, 2, f"feature list {kind}")
        for number, wire, value in _fields(inner) if kind in (1, 2, 3) else ():
            if number != 1:
                continue
            if kind == 1:
                _expect(wire, 2, "a bytes_list value")
                values.append(value)
            elif kind == 2 and wire == 2:
                if len(value) % 4:
                    raise ValueError(f"packed floats of {len(value)} bytes, not a multiple of 4")
                values.extend(struct.unpack(f"<{len(value) // 4}f", value))
            elif kind == 2:
                _expect(wire, 5, "a float_list value")
                values.extend(struct.unpack("<f", value))
            elif wire == 2:
                pos = 0
                while pos < len(value):
                    n, pos = _varint(value, pos)
                    values.append(_signed(n))
            else:
                _expect(wire, 0, "an int64_list value")
                values.append(_signed(value))
        return values
    return []


def _parse_example(record: bytes) -> dict[str, list[Any]]:
    features: dict[str, list[Any]] = {}
    for number, wire, body in _fields(record):
        if number != 1:
            continue
        _expect(wire, 2, "Example.features")
        for entry_number, entry_wire, entry in _fields(body):
            if entry_number != 1:
                continue
            _expect(entry_wire, 2, "a feature map entry")
            name, value = "", b""
            for n, w, v in _fields(entry):
                if n == 1:
                    _expect(w, 2, "a feature name")
                    name = v.decode("utf-8")
                elif n == 2:
                    _expect(w, 2, "a Feature")
                    value = v
            features[name] = _feature(value)
    return features


def parse_example(record: bytes, *, url: str | None = None, offset: int | None = None) -> dict[str, list[Any]]:
    """The features of a serialized ``tf.train.Example``: name -> list of bytes, floats or ints. Bytes that are
    not an Example raise :class:`~shardstream.errors.RecordFormatError` (naming ``url`` and ``offset`` where given).
    """
    try:
        return _parse_example(record)
    except (ValueError, struct.error) as e:  # UnicodeDecodeError is a ValueError
        raise RecordFormatError(f"the record is not a tf.train.Example: {e}", url=url, offset=offset) from e


def read_examples(data: bytes, url: str = "<bytes>", *, check_crc: bool = True,
                  max_record: int = MAX_RECORD) -> list[dict[str, list[Any]]]:
    """The Examples of the bytes of a whole TFRecord file (gzip-compressed or not: by its signature), checksums
    verified unless ``check_crc=False``; anything wrong raises :class:`~shardstream.errors.RecordFormatError`
    and nothing else (a fuzz target: ``check_crc=False`` lets mutated records reach the Example parser). Memory:
    the records read, each at most ``max_record`` bytes.

    >>> read_examples(frame_record(b"\\x0a\\x00")), read_examples(b"")
    ([{}], [])
    """
    stream: IO[bytes] = io.BytesIO(data)
    if data[:2] == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
    return [parse_example(record, url=url, offset=offset)
            for offset, record in iter_records(stream, url, check_crc=check_crc, max_record=max_record)]  # fmt: skip


def _column(feature: str) -> str:
    return feature.replace("/", "_")


def _feature_names(features: dict[str, list[Any]], fields: dict[str, str]) -> dict[str, str]:
    """The field-name mapping of a record (:func:`.fields.field_names`): its media features are those holding one
    byte string with a known signature (an encoded image or sound)."""
    media = [_column(name) for name, values in features.items()
             if len(values) == 1 and isinstance(values[0], bytes) and sniff_extension(values[0]) != "bin"]  # fmt: skip
    return field_names(map(_column, features), media, fields)


def _feature_field(name: str, values: list[Any], names: dict[str, str] | None = None) -> tuple[str, bytes] | None:
    column = _column(name)
    if not values:
        return None
    if len(values) == 1:
        return column_field(column, values[0], rename=names)
    if isinstance(values[0], bytes):
        try:
            return column_field(column, [v.decode("utf-8") for v in values], rename=names)
        except UnicodeDecodeError:
            given = (names or {}).get(column)
            field = given if given is not None and given not in (EXTENSION, LABEL) else f"{column}.msgpack"
            return field, msgpack_dumps(values)
    return column_field(column, values, rename=names)


def _key(features: dict[str, list[Any]], feature: str, default: str) -> str | None:
    """The key of a record: the first value of its ``feature`` (``__key__`` by default), else ``default``; None
    when that value is bytes that are not UTF-8."""
    values = features.get(feature)
    if not values:
        return default
    if not isinstance(values[0], bytes):
        return str(values[0])
    try:
        return values[0].decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclasses.dataclass(frozen=True)
class TFRecordSource:
    """The ``tf.train.Example`` records of one TFRecord file (gzip-compressed or not), one sample each; the key is
    the ``key`` feature where given, else ``FILESTEM-RECORDNUMBER``. ``rename`` maps features (``/`` written
    ``_``: ``image_encoded``) to field names, over the default names."""

    url: str
    key: str | None = None
    compression: str | None = None  # None: by the ``.gz`` suffix or the gzip signature; "gzip"; "none"
    rename: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return f"tfrecord {self.url} key={self.key} compression={self.compression} rename={self.rename}"

    def samples(self) -> Iterator[dict[str, Any] | Skip]:
        stem = self.url.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
        fields = dict(self.rename)
        raw = open_url(self.url)
        try:
            stream: IO[bytes] = raw
            head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
            if self.compression == "gzip" or (self.compression is None and (self.url.endswith(".gz") or head == b"\x1f\x8b")):
                stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
            for number, (offset, record) in enumerate(iter_records(stream, self.url)):
                default = f"{stem}-{number:08d}"
                try:
                    features = parse_example(record)
                except RecordFormatError as e:
                    yield Skip(default, f"record at offset {offset}: {e.problem}")
                    continue
                key = _key(features, self.key or "__key__", default)
                if key is None:
                    yield Skip(default, f"record at offset {offset}: its key feature {self.key or '__key__'!r} is "
                                        "not UTF-8 text")  # fmt: skip
                    continue
                sample: dict[str, Any] = {"__key__": safe_key(key)}
                names = _feature_names(features, fields)
                for name, values in sorted(features.items()):
                    got = _feature_field(name, values, names)
                    if got is not None:
                        sample[got[0]] = got[1]
                yield sample if len(sample) > 1 else Skip(sample["__key__"], "the record has no features")
        finally:
            raw.close()
