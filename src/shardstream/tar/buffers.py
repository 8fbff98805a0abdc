"""What the header walk reads from: a :class:`Source` is ``buf[pos:]`` (the unread bytes, ``buf[0]`` at offset
``base``) that can be refilled.

- :class:`FileBuffer`: a plain regular file, read by offset (``pread``) into one buffer that is reused, and
  large members read straight into their own ``bytes`` (one copy from the page cache, nothing read twice).
- :class:`StreamBuffer`: any other binary stream read in large chunks (pipes, sockets with short reads,
  decompressors); large members of plain files are read straight into their own bytes where ``pread`` is missing.
- :class:`WindowBuffer`: a plain regular file read through memory-mapped windows (no copy until a member is cut
  out), where the C header walk prefetches ahead; large members read as by :class:`FileBuffer`. (These two live in
  :mod:`shardstream.tar.filebuffers`.)
- :func:`source_for`: the right one for a stream.
- :class:`MappedBuffer`: a whole tar already in memory (an ``mmap``, ``bytes``), nothing left to read.
- :func:`map_file`: a plain local file mapped read-only, for zero-copy reads.

>>> import io
>>> src = StreamBuffer(io.BytesIO(b"abcdef"), bufsize=4)
>>> src.fill(5), bytes(src.buf[src.pos : src.pos + 5])
(True, b'abcde')
>>> MappedBuffer(b"xy").fill(3)
False
"""

from __future__ import annotations

import io
import mmap
import os
import stat
from typing import IO, Any, Protocol

from ..config import get_settings
from . import accel
from .filebuffers import _DIRECT_MIN, FileBuffer, WindowBuffer

__all__ = ["FileBuffer", "MappedBuffer", "Source", "StreamBuffer", "WindowBuffer", "map_file", "source_for"]

_MAX_READ = 1 << 24  # no single read asks for more than this, whatever size a header claims
#: Whether :func:`source_for` reads plain files through :class:`WindowBuffer` (maps) instead of :class:`FileBuffer`
#: (``preadv``). None: where ``SHARDSTREAM_MMAP`` is on (the default) and the C header walk prefetches ahead
#: (:func:`~shardstream.tar.accel.prefetch_ahead`; without the prefetch the walk stalls on each first touch and the maps cost more CPU than
#: the copy). True or False force it (tests, measurements); ``SHARDSTREAM_MMAP=0`` turns maps off whatever this says.
MAP_WINDOWS: bool | None = None


class Source(Protocol):
    """What :func:`~shardstream.tar.reader.walk` reads from: ``buf[pos:]`` are the unread bytes, ``buf[0]`` is at offset ``base``."""

    buf: Any
    pos: int
    base: int
    eof: bool

    def fill(self, need: int) -> bool: ...

    def take_direct(self, start: int, size: int, padded: int) -> bytes | None: ...


class StreamBuffer:
    """The unread bytes of a stream: ``buf[pos:]``, where ``buf[0]`` is at stream offset ``base``.

    A :class:`Source` for :func:`~shardstream.tar.reader.walk`; other walks (the C sample grouping in :mod:`shardstream.reading`) may
    consume ``buf`` from ``pos`` and hand the rest to :func:`walk` at a member boundary.

    A stream that fails is not read again: what it gave before failing stays readable, and every later fill that
    asks for more raises the same error (``failure``), so a walk that takes over after another walk met the
    failure meets it at the same byte as a walk that read from the start.
    """

    __slots__ = ("_read", "_bufsize", "_file", "buf", "pos", "base", "eof", "failure")

    def __init__(self, stream: IO[bytes], bufsize: int):
        self._read = stream.read
        self._bufsize = bufsize
        self._file = stream if _is_plain_file(stream) else None
        self.buf = b""
        self.pos = self.base = 0
        self.eof = False
        self.failure: Exception | None = None

    def file_end(self) -> int | None:
        """The size of the plain file being read (None for other streams): a member reaching past it is truncated,
        whatever its header's size field says, and is reported so before anything is allocated for it."""
        try:
            return None if self._file is None else os.fstat(self._file.fileno()).st_size
        except (OSError, ValueError):
            return None

    def take_direct(self, start: int, size: int, padded: int) -> bytes | None:
        """The data of a large member whose data begins at ``buf[start]``, read from the file in one copy.

        Only for plain seekable files, and only when the buffer does not hold the whole member; returns None
        otherwise, or when the file is shorter than the member (the caller then reports the truncation).
        """
        f = self._file
        if f is None or size < _DIRECT_MIN or len(self.buf) - start >= size:
            return None
        f.seek(start - len(self.buf), os.SEEK_CUR)  # back to the first data byte
        data = f.read(size)
        pad = f.read(padded - size) if len(data) == size else b""
        if len(data) + len(pad) < padded:
            f.seek(self.base + len(self.buf) - (self.base + start + len(data) + len(pad)), os.SEEK_CUR)
            return None
        self.base += start + padded
        self.buf, self.pos = b"", 0
        return data

    def fill(self, need: int) -> bool:
        """Read until ``need`` bytes are available at ``pos``; False if the stream ends first.

        Reads are bounded (at most ``max(bufsize, 16 MiB)`` each), so a corrupt size never allocates more
        than the stream actually holds.
        """
        avail = len(self.buf) - self.pos
        if avail >= need:
            return True
        if self.failure is not None:
            raise self.failure
        self.base += self.pos
        if avail and self._file is not None and not self.eof:
            # a plain file: read the unread tail again with what follows (one copy of the data, not two)
            self._file.seek(-avail, os.SEEK_CUR)
            parts, avail = [], 0
        else:
            parts = [self.buf[self.pos :]] if avail else []
        self.pos = 0
        try:
            while avail < need and not self.eof:
                chunk = self._read(max(self._bufsize, min(need - avail, _MAX_READ)))
                if chunk:
                    parts.append(chunk)
                    avail += len(chunk)
                else:  # b"" (end of stream) or None (a non-blocking stream with nothing to read: the end)
                    self.eof = True
        except BaseException as e:
            self.eof = True  # a failed stream is not read again; what it gave before failing stays readable
            self.failure = e if isinstance(e, Exception) else None
            raise
        finally:
            self.buf = parts[0] if len(parts) == 1 and type(parts[0]) is bytes else b"".join(parts)
        return avail >= need


def source_for(stream: IO[bytes], bufsize: int, *, windows: bool = True) -> FileBuffer | WindowBuffer | StreamBuffer:
    """A :class:`WindowBuffer` or :class:`FileBuffer` for a plain regular file (where ``os.preadv`` exists; see
    :data:`MAP_WINDOWS`), else a :class:`StreamBuffer`. ``windows=False``: never a :class:`WindowBuffer` (for the
    pure-Python walk, which copies every header and member out of the buffer: the maps only pay with the C walk's
    prefetch, and a walk that hands out each member would check the file's size after each)."""
    if _HAVE_PREADV and _is_plain_file(stream):
        try:
            fd, start = stream.fileno(), stream.tell()
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode):
                if windows and st.st_size > start and map_windows():
                    return WindowBuffer(stream, fd, start, bufsize)
                return FileBuffer(stream, fd, start, bufsize)
        except (OSError, ValueError):
            pass
    return StreamBuffer(stream, bufsize)


def sniff_file(stream: IO[bytes], size: int) -> bytes | None:
    """The next ``size`` bytes of a plain regular file, read by offset (its position does not move); None for
    other streams, and where a :class:`FileBuffer` would not read it."""
    if not (_HAVE_PREADV and _is_plain_file(stream)):
        return None
    try:
        fd = stream.fileno()
        return os.pread(fd, size, stream.tell()) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError):
        return None


class MappedBuffer:
    """A :class:`Source` over a whole tar held in memory (an ``mmap``, ``bytes``...): nothing left to read.

    ``buf`` is the buffer itself; slicing it (headers) copies a block, member data is never touched here.
    """

    __slots__ = ("buf", "pos", "base", "eof")

    def __init__(self, buffer: Any):
        self.buf = buffer
        self.pos = self.base = 0
        self.eof = True

    def fill(self, need: int) -> bool:
        return len(self.buf) - self.pos >= need

    def take_direct(self, start: int, size: int, padded: int) -> bytes | None:
        return None


def map_file(stream: IO[bytes]) -> mmap.mmap | None:
    """The whole file behind ``stream`` mapped read-only, or None when it cannot be: not a plain regular file
    (a pipe, socket, decompressor, HTTP body...), not at its start, or empty; or when maps are turned off
    (``SHARDSTREAM_MMAP=0``: the file is then read as a stream, so ``zero_copy`` gives ``bytes``).

    The map stays valid after ``stream`` is closed and lives as long as a reference to it (or to a memoryview
    of it) does. The file must not be truncated while mapped (reading a page past its new end kills the
    process with SIGBUS), as for any memory-mapped reader: where that can happen, set ``SHARDSTREAM_MMAP=0``.
    """
    if not _is_plain_file(stream) or not get_settings().mmap:
        return None
    try:
        if stream.tell() != 0:
            return None
        fd = stream.fileno()
        if os.fstat(fd).st_size == 0:
            return None
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


_HAVE_PREADV = hasattr(os, "preadv") and hasattr(os, "pread")


def map_windows() -> bool:
    """Whether :func:`source_for` gives plain files a :class:`WindowBuffer` now (see :data:`MAP_WINDOWS`)."""
    settings = get_settings()
    if not settings.mmap or not hasattr(mmap, "MAP_SHARED"):
        return False
    if MAP_WINDOWS is not None:
        return MAP_WINDOWS
    return accel.prefetch_ahead() > 0 and not settings.no_extensions


def _is_plain_file(stream: IO[bytes]) -> bool:
    """A regular file opened for reading (not a pipe, socket or decompressor): cheap to seek back in."""
    if not isinstance(stream, (io.BufferedReader, io.FileIO)):
        return False
    try:
        return stream.seekable()
    except (OSError, ValueError):
        return False
