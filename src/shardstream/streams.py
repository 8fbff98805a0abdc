"""Stream files: concatenated MessagePack or CBOR records, and JSON lines, read and written one record at a time.

A *stream file* holds records back to back, with no framing of its own: ``.msgpack``/``.mp`` (MessagePack
values one after the other), ``.cbors`` (CBOR values one after the other, webdataset's name) and
``.jsonl``/``.ndjson`` (one JSON value per line). They suit large collections of small samples (tuples, short
strings, token ids) that would waste a 512-byte tar header each. The pipeline stages ``msgpack_to_samples``,
``cbors_to_samples`` and ``jsonl_to_samples`` (:mod:`shardstream.pipeline.stages.records`) read them from a shard
list exactly as ``tarfile_to_samples`` reads tar shards; this module is the format: :func:`iter_records` reads
one file, :class:`RecordWriter` writes one.

Each record is yielded as it was written (a list stays a list, a dict a dict). Memory is bounded: the file is
read in chunks of ``CHUNK`` bytes and one record may be at most ``max_record`` bytes (default 64 MiB). A corrupt
or truncated record raises :class:`~shardstream.errors.RecordFormatError` naming the file, the record number and
its byte offset; the records before it have been yielded.

>>> with RecordWriter("points.cbors") as w:
...     for i in range(3):
...         w.write([i, f"p{i}"])
>>> with open("points.cbors", "rb") as f:
...     list(iter_records(f, "cbors", url="points.cbors"))
[[0, 'p0'], [1, 'p1'], [2, 'p2']]
>>> with RecordWriter("points.jsonl") as w:
...     w.write({"id": 1, "text": "hi"})
>>> with open("points.jsonl", "rb") as f:
...     list(iter_records(f, "jsonl"))
[{'id': 1, 'text': 'hi'}]
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterator
from typing import IO, Any, cast

from .errors import ConfigError, MissingDependencyError, RecordFormatError, WriteError

__all__ = ["CHUNK", "FORMATS", "RecordWriter", "format_of", "iter_records"]

#: bytes read from the file at a time
CHUNK = 1 << 20
#: the formats, and the file endings that name them
FORMATS = {"msgpack": (".msgpack", ".mp", ".msg"), "cbors": (".cbors", ".cbor"), "jsonl": (".jsonl", ".ndjson")}
_MAX_RECORD = 64 << 20


def format_of(url: str) -> str:
    """The stream format a file name ends with (compression endings are not read: decompress first).

    >>> format_of("s3://b/part-0001.jsonl"), format_of("data.cbors")
    ('jsonl', 'cbors')
    """
    lowered = os.fspath(url).lower()
    for name, endings in FORMATS.items():
        if lowered.endswith(endings):
            return name
    raise ConfigError(f"{url!r} does not end with a stream-file ending ({', '.join(e for v in FORMATS.values() for e in v)}); "
                      "name the format explicitly")


def _check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown stream format {fmt!r}; one of {sorted(FORMATS)}")
    return fmt


def iter_records(stream: IO[bytes], fmt: str, url: str | None = None,
                 max_record: int = _MAX_RECORD) -> Iterator[Any]:
    """The records of one stream file (``fmt``: ``"msgpack"``, ``"cbors"`` or ``"jsonl"``), in order.

    >>> import io
    >>> list(iter_records(io.BytesIO(b'{"a": 1}\\n\\n[2]\\n'), "jsonl"))
    [{'a': 1}, [2]]
    """
    reader = {"msgpack": _msgpack, "cbors": _cbors, "jsonl": _jsonl}[_check_format(fmt)]
    return reader(stream, url, max_record)


def _msgpack(stream: IO[bytes], url: str | None, max_record: int) -> Iterator[Any]:
    import msgpack  # noqa: PLC0415 - msgpack loads only for msgpack streams

    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max_record + CHUNK)
    fed, record, start = 0, 0, 0
    while True:
        chunk = stream.read(CHUNK)
        if chunk:
            try:
                unpacker.feed(chunk)
            except msgpack.BufferFull as e:
                raise RecordFormatError(f"a record is larger than max_record={max_record} bytes", url=url,
                                        record=record, offset=start) from e
            fed += len(chunk)
        while True:
            try:
                value = unpacker.unpack()
            except msgpack.OutOfData:
                break
            except Exception as e:  # FormatError, StackError, ValueError: the bytes are not MessagePack
                raise RecordFormatError(f"not a MessagePack record ({type(e).__name__}: {e})", url=url, record=record,
                                        offset=start) from e
            if unpacker.tell() - start > max_record:
                break
            yield value
            record, start = record + 1, unpacker.tell()
        if fed - start > max_record:
            raise RecordFormatError(f"a record is larger than max_record={max_record} bytes", url=url,
                                    record=record, offset=start)
        if not chunk:
            if start < fed:
                raise RecordFormatError(f"the last record is truncated ({fed - start} bytes of it)", url=url,
                                        record=record, offset=start)
            return


class _Counting(io.RawIOBase):
    """A read-only view of a binary stream that counts bytes and can tell whether anything is left."""

    def __init__(self, stream: IO[bytes], limit: int):
        self.stream, self.offset, self.limit, self.start, self._ahead = stream, 0, limit, 0, b""

    def read(self, n: int | None = -1) -> bytes:
        n = -1 if n is None else n
        if self.offset - self.start + max(n, 0) > self.limit:
            raise RecordFormatError(f"a record is larger than max_record={self.limit} bytes", offset=self.start)
        data, self._ahead = self._ahead + self.stream.read(max(n - len(self._ahead), 0)), b""
        self.offset += len(data)
        return data

    def readable(self) -> bool:
        return True

    def at_end(self) -> bool:
        if not self._ahead:
            self._ahead = self.stream.read(1)
        return not self._ahead


def _cbors(stream: IO[bytes], url: str | None, max_record: int) -> Iterator[Any]:
    try:
        import cbor2  # noqa: PLC0415 - optional dependency (extra cbor)
    except ImportError as e:
        raise MissingDependencyError("reading .cbors files", "cbor", "cbor2") from e
    counting = _Counting(stream, max_record)
    # _Counting is a binary reader (io.RawIOBase), which typing.IO does not name: cast, checked with or without cbor2
    decoder = cbor2.CBORDecoder(cast(IO[bytes], counting))
    record = 0
    while not counting.at_end():
        counting.start = counting.offset
        try:
            value = decoder.decode()
        except RecordFormatError as e:
            raise RecordFormatError(e.problem, url=url, record=record, offset=counting.start) from e
        except (EOFError, getattr(cbor2, "CBORDecodeEOF", EOFError)) as e:  # the data stopped inside the record
            raise RecordFormatError("the last record is truncated", url=url, record=record,
                                    offset=counting.start) from e
        except Exception as e:
            inner = e.__cause__ or e.__context__  # cbor2 wraps what the stream raised (a record over the limit)
            problem = inner.problem if isinstance(inner, RecordFormatError) else \
                f"not a CBOR record ({type(e).__name__}: {e})"
            raise RecordFormatError(problem, url=url, record=record, offset=counting.start) from e
        yield value
        record += 1


def _jsonl(stream: IO[bytes], url: str | None, max_record: int) -> Iterator[Any]:
    offset, line_number = 0, 0
    while True:
        line = stream.readline(max_record + 1)
        if not line:
            return
        if len(line) > max_record and not line.endswith(b"\n"):
            raise RecordFormatError(f"a line is longer than max_record={max_record} bytes", url=url,
                                    record=line_number, offset=offset)
        if line.strip():
            try:
                value = json.loads(line)
            except RecursionError as e:  # the C decoder's depth guard: arrays/objects nested ~1000 deep
                raise RecordFormatError("a JSON line nested too deeply to decode", url=url, record=line_number,
                                        offset=offset) from e
            except (ValueError, UnicodeDecodeError) as e:
                problem = "the last line is truncated" if not line.endswith(b"\n") else f"not a JSON line: {e}"
                raise RecordFormatError(problem, url=url, record=line_number, offset=offset) from e
            yield value
        offset, line_number = offset + len(line), line_number + 1


def _encoder(fmt: str) -> Any:
    if fmt == "msgpack":
        import msgpack  # noqa: PLC0415 - msgpack loads only for msgpack streams

        return lambda value: msgpack.packb(value, use_bin_type=True)
    if fmt == "cbors":
        try:
            import cbor2  # noqa: PLC0415 - optional dependency (extra cbor)
        except ImportError as e:
            raise MissingDependencyError("writing .cbors files", "cbor", "cbor2") from e
        return cbor2.dumps
    return lambda value: json.dumps(value, ensure_ascii=False).encode("utf-8") + b"\n"


class RecordWriter:
    """Write records to a stream file: a local path (written to a temporary file, renamed on ``close()``: no
    half-written file under the final name) or an open binary stream (left open). ``fmt`` defaults to the path's
    ending (see :data:`FORMATS`).

    >>> import io
    >>> buffer = io.BytesIO()
    >>> with RecordWriter(buffer, "msgpack") as w:
    ...     w.write({"x": 1}); w.write([1, 2])
    >>> buffer.seek(0); list(iter_records(buffer, "msgpack"))
    0
    [{'x': 1}, [1, 2]]
    """

    def __init__(self, target: str | os.PathLike[str] | IO[bytes], fmt: str | None = None):
        self.path = None if hasattr(target, "write") else os.fspath(target)
        self.format = _check_format(fmt) if fmt is not None else format_of(self.path or "")
        self._encode, self.count = _encoder(self.format), 0
        self._stream: IO[bytes] | None
        self._tmp: str | None
        if self.path is None:
            self._stream, self._tmp = target, None  # type: ignore[assignment]
        else:
            folder = os.path.dirname(os.path.abspath(self.path))
            fd, self._tmp = tempfile.mkstemp(prefix=".", suffix=".partial", dir=folder)
            self._stream = os.fdopen(fd, "wb")

    def write(self, record: Any) -> None:
        """Append one record."""
        try:
            data = self._encode(record)
        except Exception as e:
            raise ConfigError(f"record {self.count} cannot be written as {self.format}: {e}") from e
        try:
            self._stream.write(data)  # type: ignore[union-attr]
        except OSError as e:
            raise WriteError(f"cannot write record {self.count}: {e}", url=self.path) from e
        self.count += 1

    def close(self) -> None:
        """Finish the file (rename the temporary file to the final name)."""
        if self._tmp is not None and self._stream is not None:
            self._stream.close()
            os.replace(self._tmp, self.path)  # type: ignore[arg-type]
        self._stream = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, kind: Any, *rest: Any) -> None:
        if kind is not None and self._tmp is not None and self._stream is not None:
            self._stream.close()
            os.unlink(self._tmp)
            self._stream = None
            return
        self.close()
