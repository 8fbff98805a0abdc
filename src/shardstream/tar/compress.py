"""Compressed shards: detect gzip / bz2 / xz / zstd by their first bytes (never by file name) and decompress.

Detection needs no ``seek``: the sniffed bytes are replayed in front of the rest of the stream. Decompression
errors (a truncated ``.tar.gz``, corrupt data) surface from :func:`iter_tar` as
:class:`~shardstream.errors.TarFormatError` chained to the decompressor's exception, while errors of the
underlying stream itself (a broken connection) pass through unchanged. Every byte decompressed before the
error is handed out first, so every complete member before the damage is read (as ``tarfile`` does).

>>> import gzip, io
>>> from shardstream.tar.writer import TarStreamWriter
>>> raw = io.BytesIO()
>>> with TarStreamWriter(raw) as tw:
...     _ = tw.add("a.txt", b"hi")
>>> list(iter_tar(io.BytesIO(gzip.compress(raw.getvalue())), "a.tar.gz"))
[('a.txt', b'hi', 512)]
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar, cast

from ..errors import MissingDependencyError, TarFormatError
from .buffers import map_file, sniff_file
from .reader import Member, iter_members

__all__ = ["compression", "iter_tar", "map_tar", "open_tar_stream", "read_tar", "then_pending"]

T = TypeVar("T")
_SNIFF = 10  # bytes needed to recognise every format below
_ZSTD_INPUT = 1 << 14  # compressed bytes per zstd decompression step (bounds the output of one step)
_BZ2_BLOCK, _BZ2_END = b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90"


def compression(head: bytes) -> str | None:
    """The compression of a stream that starts with ``head``: ``"gzip"``, ``"bz2"``, ``"xz"``, ``"zstd"`` or None.

    >>> compression(b"\\x1f\\x8b\\x08\\x00"), compression(b"\\x28\\xb5\\x2f\\xfd"), compression(b"sample.txt\\0")
    ('gzip', 'zstd', None)
    """
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    # "BZh" could begin a member name: require the level digit and a block (or end-of-stream) magic too
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:10] in (_BZ2_BLOCK, _BZ2_END):
        return "bz2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


class _Source(io.RawIOBase):
    """The stream with its sniffed first bytes put back; remembers whether the stream itself raised."""

    def __init__(self, head: bytes, stream: IO[bytes]):
        self._head, self._stream = head, stream
        self.failed = False
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            data, self._head = self._head + self._read(-1), b""
        elif self._head:  # a short read: the rest of the sniffed bytes, at most ``size``
            data, self._head = self._head[:size], self._head[size:]
        else:
            data = self._read(size)
        self.consumed += len(data)
        return data

    def _read(self, size: int) -> bytes:
        try:
            return self._stream.read(size) or b""
        except BaseException:
            self.failed = True
            raise


class _ZstdReader(io.RawIOBase):
    """Decompress the zstd frames of ``source``, raising ``EOFError`` if it ends inside a frame.

    (``zstandard``'s own ``stream_reader`` returns a truncated frame's data as if it were complete.)
    """

    def __init__(self, source: _Source):
        try:
            import zstandard  # noqa: PLC0415 - optional: shardstream[zstd]
        except ImportError:
            raise MissingDependencyError("reading .tar.zst shards", "zstd", "zstandard") from None
        self._source = source
        self._new_frame = zstandard.ZstdDecompressor().decompressobj
        self._frame = self._new_frame()
        self._in_frame = False  # some bytes of the current frame were fed
        self._out, self._pos = b"", 0  # decompressed bytes, and how many were returned
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._pos == len(self._out) and not self._done:
            self._out, self._pos = self._decompress(self._source.read(_ZSTD_INPUT)), 0
        data = self._out[self._pos : self._pos + len(buffer)]
        self._pos += len(data)
        buffer[: len(data)] = data
        return len(data)

    def _decompress(self, chunk: bytes) -> bytes:
        if not chunk:
            if self._in_frame:
                raise EOFError("the zstd stream ends inside a frame")
            self._done = True
            return b""
        out = []
        while chunk:
            self._in_frame = True
            out.append(self._frame.decompress(chunk))
            if not self._frame.eof:
                break
            chunk = self._frame.unused_data  # the next frame starts in this chunk
            self._frame, self._in_frame = self._new_frame(), False
        return b"".join(out)


class _Salvaging(io.RawIOBase):
    """The decompressed stream, read one decompression step at a time, so that an error loses nothing.

    A plain ``read(1 MiB)`` on ``GzipFile`` & co. raises at a truncation and drops everything it had
    decompressed in that call. Here the bytes decompressed before an error are returned first, and the error is
    raised by the next read, as a :class:`~shardstream.errors.TarFormatError` naming ``url`` (errors of the
    compressed stream itself, such as a broken connection, pass through unchanged).
    """

    def __init__(self, inner: Any, kind: str, source: _Source):
        self._inner, self._kind, self._source = inner, kind, source
        self._error: BaseException | None = None
        self._step = getattr(inner, "read1", None) or inner.read
        self.url = "<stream>"

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        self.raise_pending()
        if size is None or size < 0:
            size = 1 << 62
        parts, n = [], 0
        while n < size:
            try:
                chunk = self._step(min(size - n, 1 << 20))
            except _decompression_errors() as e:
                self._error = e  # raised now, or by the next read once the caller has the bytes before the damage
                if not n:
                    self.raise_pending()
                break
            if not chunk:
                break
            parts.append(chunk)
            n += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def raise_pending(self) -> None:
        """Raise the error held back for the next read (also when the reader stopped before reading again)."""
        if self._error is None:
            return
        error, self._error = self._error, None
        if self._source.failed:  # the compressed stream itself failed (e.g. a broken connection)
            raise error
        problem = f"corrupt or truncated {self._kind} data after {self._source.consumed} compressed bytes ({error})"
        raise TarFormatError(problem, url=self.url) from error

    def close(self) -> None:
        self._inner.close()
        super().close()


def _sniff(stream: IO[bytes]) -> tuple[bytes, IO[bytes]]:
    """The first bytes of ``stream`` and a stream that still starts with them."""
    head = sniff_file(stream, _SNIFF)
    if head is not None:  # a plain file: read by offset, nothing buffered (peek would read a whole buffer)
        return head, stream
    peek = getattr(stream, "peek", None)
    if peek is not None:
        head = peek(_SNIFF)[:_SNIFF]
        if len(head) == _SNIFF:
            return head, stream
    head = b""
    while len(head) < _SNIFF:
        chunk = stream.read(_SNIFF - len(head))
        if not chunk:
            break
        head += chunk
    if head and _seekable(stream):
        try:
            stream.seek(-len(head), io.SEEK_CUR)  # a plain file: put the bytes back by seeking, no wrapper
            return head, stream
        except (OSError, ValueError):
            pass
    return head, _Source(head, stream)  # type: ignore[return-value]


def _seekable(stream: IO[bytes]) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def open_tar_stream(stream: IO[bytes]) -> IO[bytes]:
    """A stream of the uncompressed tar: decompressing for gzip, bz2, xz, zstd; else ``stream`` as it is.

    The stream only needs ``read`` (pipes and sockets work). ``.tar.zst`` needs the optional ``zstandard``
    package (``pip install 'shardstream[zstd]'``). Closing the returned stream never closes ``stream``.

    >>> import bz2, io
    >>> open_tar_stream(io.BytesIO(bz2.compress(b"tar bytes"))).read()
    b'tar bytes'
    """
    return _open(stream)[0]


def _open(stream: IO[bytes]) -> tuple[IO[bytes], str | None, _Source]:
    """The tar stream, the compression found, and the compressed source (to tell its own errors apart)."""
    head, readable = _sniff(stream)
    kind = compression(head)
    source = readable if isinstance(readable, _Source) else _Source(b"", readable)
    if kind is None:
        return readable, None, source
    if kind == "gzip":
        inner: Any = gzip.GzipFile(fileobj=source, mode="rb")
    elif kind == "bz2":
        inner = bz2.BZ2File(source, "rb")
    elif kind == "xz":
        inner = lzma.LZMAFile(cast("IO[bytes]", source), "rb")  # a raw stream: read and readinto are all it uses
    else:
        inner = _ZstdReader(source)
    return _Salvaging(inner, kind, source), kind, source  # type: ignore[return-value]


def map_tar(stream: IO[bytes]) -> Any:
    """The uncompressed tar file behind ``stream`` mapped read-only (an ``mmap``, for
    :func:`~shardstream.tar.reader.iter_members_mapped`), or None when the shard cannot be read in place: a
    compressed file, or a stream that is not a plain regular file at its start (see
    :func:`~shardstream.tar.buffers.map_file`).

    >>> import io
    >>> map_tar(io.BytesIO(b"not a file")) is None
    True
    """
    mapped = map_file(stream)
    if mapped is not None and compression(mapped[:_SNIFF]) is not None:
        mapped.close()
        return None
    return mapped


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (EOFError, zlib.error, lzma.LZMAError, OSError)
    try:
        import zstandard  # noqa: PLC0415 - optional: shardstream[zstd]
    except ImportError:
        return errors
    return (*errors, zstandard.ZstdError)


def iter_tar(
    stream: IO[bytes], url: str = "<stream>", *, bufsize: int = 1 << 20, accelerate: bool | None = None
) -> Iterator[Member]:
    """:func:`~shardstream.tar.reader.iter_members` over :func:`open_tar_stream`: ``stream`` may be compressed.

    A decompression error (truncated or corrupt compressed data) raises
    :class:`~shardstream.errors.TarFormatError` naming ``url``, chained to the decompressor's exception.

    >>> import io
    >>> list(iter_tar(io.BytesIO(b"\\x1f\\x8b" + b"garbage"), "bad.tar.gz"))
    Traceback (most recent call last):
    ...
    shardstream.errors.TarFormatError: corrupt or truncated gzip data ...
    """
    return read_tar(stream, url, lambda tar: iter_members(tar, url, bufsize=bufsize, accelerate=accelerate))


def read_tar(stream: IO[bytes], url: str, read: Callable[[IO[bytes]], Iterator[T]]) -> Iterator[T]:
    """``read(tar_stream)`` over the uncompressed tar of ``stream`` (:func:`open_tar_stream`), its decompression
    errors raised as :class:`~shardstream.errors.TarFormatError` naming ``url`` (what :func:`iter_tar` does for
    :func:`~shardstream.tar.iter_members`; :func:`shardstream.samples.iter_samples` reads through it too).

    >>> import gzip, io
    >>> from shardstream.tar.writer import TarStreamWriter
    >>> raw = io.BytesIO()
    >>> with TarStreamWriter(raw) as tw:
    ...     _ = tw.add("a.txt", b"hi")
    >>> list(read_tar(io.BytesIO(gzip.compress(raw.getvalue())), "a.tar.gz", lambda tar: iter([tar.read(5)])))
    [b'a.txt']
    """
    tar_stream, kind, source = _open(stream)
    if kind is None:
        return read(tar_stream)
    tar_stream.url = url  # type: ignore[attr-defined]
    return then_pending(read(tar_stream), tar_stream)


def then_pending(items: Iterator[T], tar: IO[bytes]) -> Iterator[T]:
    """``items`` read from ``tar`` (a stream :func:`read_tar` gave ``read``), then the decompression error held back
    for the end, if any: an error after the end of the archive (a damaged trailer, a bad checksum) is still an error.

    The members of a compressed tar end so (:func:`iter_tar`), and so must a walk that takes over a tar stream
    part-way (the C sample grouping's, in :mod:`shardstream.reading`): the samples grouped from the members then
    see the error where they see it when grouped from :func:`iter_tar`, before the last sample is complete."""
    yield from items
    if isinstance(tar, _Salvaging):
        tar.raise_pending()
