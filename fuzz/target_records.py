"""Fuzz targets: stream files (:mod:`shardstream.streams`: concatenated MessagePack or CBOR, JSON lines) and TFRecord
files (:mod:`shardstream.convert.tfrecord`).

A stream input is a file's bytes; its seed's ending (``stream-*.msgpack|cbors|jsonl``) names the format. It is
read with :func:`~shardstream.streams.iter_records`, once with the default ``max_record`` and once with a small
one. Allowed: records, then :class:`~shardstream.errors.RecordFormatError`. Findings besides those of
:func:`targets.outcome`: the two readings disagree on the records before the error, or a record larger than the
small limit is yielded under it.

A TFRecord input is a file's bytes (gzip-compressed or not), read by
:class:`~shardstream.convert.tfrecord.TFRecordSource` from a local file as the converter does, and by
:func:`~shardstream.convert.tfrecord.iter_records` from memory. Allowed: samples and skips, then a
``RecordFormatError``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import struct

from mutators import flip
from targets import _TMP, Finding, outcome

from shardstream.convert.tfrecord import TFRecordSource, _masked, frame_record, iter_records as iter_tfrecords
from shardstream.errors import RecordFormatError
from shardstream.streams import iter_records

SMALL = 1 << 12  # the small max_record


def check_stream(name: str, data: bytes, rng: random.Random) -> None:
    """Read a stream file twice (default and small ``max_record``); same records before any error."""
    fmt = name.rsplit(".", 1)[1]
    full = _records(data, fmt, None)
    small = _records(data, fmt, SMALL)
    got, error = small
    for record in got:
        size = len(_encode(fmt, record))
        if size > 8 * SMALL:  # an encoding may differ in size from the original bytes, not by this much
            raise Finding(f"a record of ~{size} bytes was yielded under max_record={SMALL}")
    if len(got) > len(full[0]) or not _same(got, full[0][:len(got)]):
        raise Finding(f"max_record={SMALL} and the default read other records: {_text(got)} / {_text(full[0])}")
    if error is None and full[1] is not None:
        raise Finding(f"only the default max_record refuses the file: {full[1]}")


def _text(records: list) -> str:
    try:
        return repr(records)[:200]
    except RecursionError:
        return f"<{len(records)} records, too deep to show>"


def _same(a: list, b: list) -> bool:
    """The same records (NaN equal to NaN: compared by ``repr``; records too deep for ``repr``: by number)."""
    try:
        return repr(a) == repr(b)
    except RecursionError:
        return len(a) == len(b)


def _records(data: bytes, fmt: str, limit: int | None) -> tuple[list, str | None]:
    got: list = []

    def read() -> None:
        kwargs = {} if limit is None else {"max_record": limit}
        for record in iter_records(io.BytesIO(data), fmt, url="s." + fmt, **kwargs):
            got.append(record)

    result = outcome(read, (RecordFormatError,))
    return got, (None if result[0] == "ok" else result[2])


def _encode(fmt: str, record: object) -> bytes:
    if fmt == "jsonl":
        return _text([record]).encode()
    if fmt == "msgpack":
        import msgpack

        try:
            return msgpack.packb(record, use_bin_type=True)
        except Exception:  # noqa: BLE001 - an extension type or a key msgpack cannot pack back: size by repr
            return _text([record]).encode()
    import cbor2

    try:
        return cbor2.dumps(record)
    except Exception:  # noqa: BLE001
        return _text([record]).encode()


# -- stream mutations -------------------------------------------------------------------------------------------

_MSGPACK = [b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff", b"\xc6\xff\xff\xff\xff",
            b"\xc9\xff\xff\xff\xff\x01", b"\xd6\xff" + bytes(4), b"\xc7\x0c\xff" + bytes(12), b"\xd7\xff" + b"\xff" * 8,
            b"\x91" * 3000 + b"\xc0", b"\x81\x90\x01", b"\x81\x80\x01", b"\xc1", b"\xa3\xff\xfe\xfd", b"\xcb" + b"\xff" * 8,
            b"\xd4\x05\x00", b"\xdc\x00\x03\x01", b"\xc4\x05ab"]  # fmt: skip
_CBOR = [b"\x9b" + b"\xff" * 8, b"\xbb" + b"\xff" * 8, b"\x5b" + b"\xff" * 8, b"\x7b\x00\x00\x00\x00\xff\xff\xff\xff",
         b"\x81" * 3000 + b"\xf6", b"\x9f" * 3000, b"\xd8\x1c\x81\xd8\x1d\x00", b"\xd8\x1d\x05", b"\xc5\x82\x1b"
         + b"\x7f" + b"\xff" * 7 + b"\x01", b"\xc4\x82\x3b\x7f\xff\xff\xff\xff\xff\xff\xff\x01",
         b"\xc2\x5a\x00\x10\x00\x00" + b"\xff" * 64, b"\xc0\x6a2001-13-45", b"\xc1\xfb\x7f\xf0\x00\x00\x00\x00\x00\x00",
         b"\xd9\x01\x02\x82\x80\x80", b"\xa1\x80\x01", b"\xd8\x25\x41\x00", b"\xd8\x23\x61(", b"\xf8\x10", b"\xff",
         b"\xd9\xd9\xf7\x01", b"\x7f\x61a\x01\xff", b"\x5f\x41a\x61b\xff", b"\xfa\x7f\xc0\x00\x00",
         b"\xd8\x1e\x82\x01\x00", b"\xd9\x01\x00\x00"]  # fmt: skip
_JSON = [b"[" * 100_000 + b"]" * 100_000, b"{\"a\":" * 50_000 + b"1" + b"}" * 50_000, b"9" * 5000, b"1e999999",
         b"NaN", b"-Infinity", b"\"\\ud800\"", b"\xff\xfe{}", b"\"" + b"a" * 5000, b"{}\r{}", b"{\"a\":1,\"a\":2}",
         b"\x00", b"   ", b"[1,]", b"\"\\u0000\"", b"1" * 10, b"{\"__key__\": 1}", b"null"]  # fmt: skip


def mutate_stream(rng: random.Random, data: bytes, name: str) -> bytes:
    """Records spliced, repeated, truncated; hostile encoded values inserted; bytes flipped."""
    fmt = name.rsplit(".", 1)[1]
    pool = {"msgpack": _MSGPACK, "cbors": _CBOR, "jsonl": _JSON}[fmt]
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        at = rng.randrange(len(buf) + 1)
        if roll < 0.35:
            value = rng.choice(pool)
            if fmt == "jsonl":
                value = (b"\n" if rng.random() < 0.8 else b"") + value + (b"\n" if rng.random() < 0.8 else b"")
                at = buf.find(b"\n", at) + 1 if rng.random() < 0.7 else at
            buf[at:at] = value
        elif roll < 0.5:
            del buf[at:]
        elif roll < 0.65 and buf:
            start = rng.randrange(len(buf))
            buf[at:at] = buf[start:start + rng.randint(1, 64)] * rng.randint(1, 4)
        else:
            buf = bytearray(flip(rng, bytes(buf)))
    return bytes(buf)


# -- TFRecord ---------------------------------------------------------------------------------------------------


def check_tfrecord(data: bytes, rng: random.Random) -> None:
    """Convert the file's records to samples (as ``shardstream convert`` does), and read its framing from memory."""
    gz = data[:2] == b"\x1f\x8b"
    path = os.path.join(_TMP, "t.tfrecord" + (".gz" if gz else ""))
    with open(path, "wb") as f:
        f.write(data)
    outcome(lambda: list(TFRecordSource(path).samples()), (RecordFormatError,))
    if not gz:
        outcome(lambda: list(iter_tfrecords(io.BytesIO(data), "t.tfrecord")), (RecordFormatError,))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, wire: int, value: bytes | int) -> bytes:
    tag = _varint(number << 3 | wire)
    if wire == 0:
        return tag + _varint(int(value))  # type: ignore[arg-type]
    return tag + (_varint(len(value)) + value if wire == 2 else value)  # type: ignore[operator, arg-type]


def example(features: dict[str, tuple[int, list]]) -> bytes:
    """A serialized ``tf.train.Example``: name -> (kind 1 bytes / 2 floats / 3 ints, values)."""
    entries = b""
    for name, (kind, values) in features.items():
        if kind == 1:
            inner = b"".join(_field(1, 2, v) for v in values)
        elif kind == 2:
            inner = _field(1, 2, struct.pack(f"<{len(values)}f", *values))
        else:
            inner = _field(1, 2, b"".join(_varint(v & (1 << 64) - 1) for v in values))
        entries += _field(1, 2, _field(1, 2, name.encode()) + _field(2, 2, _field(kind, 2, inner)))
    return _field(1, 2, entries)


def _records_of(data: bytes) -> list[bytes] | None:
    try:
        return [record for _, record in iter_tfrecords(io.BytesIO(data))]
    except RecordFormatError:
        return None


_PROTO = [_varint(1 << 63) * 2, b"\x0a\xff\xff\xff\xff\x0f", b"\x0b", b"\x0f", b"\x08" + b"\xff" * 11,
          b"\x0a\x05\x0a\x03\x0a\x01\xff", b"\x0d\x01\x02", b"\x09\x01", b"\x0a\x00", b"\x12\x02\xc3\x28",
          example({"k": (2, [1.0, 2.0])})[:-1], example({"key": (1, [b"\xff\xfe"])}),
          example({"image/encoded": (1, [b"x"] * 3)}), example({"n": (3, [-1, 1 << 63, 0])}),
          example({"__key__": (3, [7])}), example({"a/../b": (1, [b"v"])}), example({"": (1, [b""])})]  # fmt: skip


def mutate_tfrecord(rng: random.Random, data: bytes) -> bytes:
    """Records' protobuf mutated and re-framed with valid checksums (mostly), a length field rewritten (with its
    checksum fixed, so the reader trusts it), records truncated or repeated, the file gzip-compressed."""
    gz = data[:2] == b"\x1f\x8b"
    raw = gzip.decompress(data) if gz and _gunzips(data) else data
    records = _records_of(raw)
    if records is None or not records or rng.random() < 0.15:
        out = flip(rng, raw) if rng.random() < 0.7 else raw[:rng.randrange(len(raw) + 1)]
    else:
        i = rng.randrange(len(records))
        roll = rng.random()
        if roll < 0.45:
            body = bytearray(records[i])
            at = rng.randrange(len(body) + 1)
            body[at:at] = rng.choice(_PROTO) if rng.random() < 0.6 else b""
            records[i] = flip(rng, bytes(body)) if rng.random() < 0.5 else bytes(body)
        elif roll < 0.6:
            records.insert(i, rng.choice(_PROTO))
        elif roll < 0.7:
            records += records[: rng.randint(1, 3)]
        out = b"".join(frame_record(r) for r in records)
        if roll >= 0.7:  # a length field the checksum vouches for, with too few bytes after it
            length = struct.pack("<Q", rng.choice([1 << 20, 1 << 31, 1 << 40, (1 << 63) - 1, (1 << 64) - 5]))
            out = out + length + struct.pack("<I", _masked(length)) + rng.randbytes(rng.randint(0, 32))
        if rng.random() < 0.1:
            out = out[:rng.randrange(len(out) + 1)]
    if gz or rng.random() < 0.15:
        packed = gzip.compress(out, 1, mtime=0)
        if rng.random() < 0.2:
            packed = packed[:rng.randrange(len(packed) + 1)] if rng.random() < 0.5 else flip(rng, packed)
        return packed
    return out


def _gunzips(data: bytes) -> bool:
    try:
        gzip.decompress(data)
        return True
    except (OSError, EOFError, ValueError):
        return False


def corpus_seeds() -> dict[str, bytes]:
    """The checked-in seeds of this kind (``--make-corpus``)."""
    import cbor2
    import msgpack

    records = [{"a": 1, "b": [1, 2.5, "x"]}, [1, "two", None, True], "text", 7, {"nested": {"k": [b"\x00\x01"]}}]
    out = {
        "stream-plain.msgpack": b"".join(msgpack.packb(r, use_bin_type=True) for r in records),
        "stream-plain.cbors": b"".join(cbor2.dumps(r) for r in records),
        "stream-plain.jsonl": b"".join(json.dumps(r, default=str).encode() + b"\n" for r in records) + b"\n",
    }
    one = example({"image/encoded": (1, [b"\xff\xd8jpeg"]), "label": (3, [7]), "score": (2, [0.5]),
                   "tags": (1, [b"a", b"b"]), "key": (1, [b"k0"])})
    two = example({"values": (3, [1, -2, 3]), "text": (1, [b"caf\xc3\xa9"]), "floats": (2, [1.0, 2.0])})
    plain = frame_record(one) + frame_record(two) + frame_record(b"")
    out["tfrecord-plain.tfrecord"] = plain
    out["tfrecord-gz.tfrecord"] = gzip.compress(plain, 1, mtime=0)
    return out
