"""What the header walk reads from: a :class:`Source` is ``buf[pos:]`` (the unread bytes, ``buf[0]`` at offset
``base``) that can be refilled.

- :class:`FileBuffer`: a plain regular file, read by offset (``pread``) into one buffer that is reused, and
  large members read straight into their own ``bytes`` (one copy from the page cache, nothing read twice).
- :class:`StreamBuffer`: any other binary stream read in large chunks (pipes, sockets with short reads,
  decompressors); large members of plain files are read straight into their own bytes where ``pread`` is missing.
- :class:`WindowBuffer`: a plain regular file read through memory-mapped windows (no copy until a member is cut
  out), where the C header walk prefetches ahead; large members read as by :class:`FileBuffer`.
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

try:
    from . import _scan
except ImportError:  # the extension is optional
    _scan = None  # type: ignore[assignment]

__all__ = ["FileBuffer", "MappedBuffer", "Source", "StreamBuffer", "WindowBuffer", "map_file", "source_for"]

_MAX_READ = 1 << 24  # no single read asks for more than this, whatever size a header claims
#: members at least this large are read from plain seekable files straight into their own bytes (one copy)
_DIRECT_MIN = 1 << 20
#: what :class:`FileBuffer` reads after a large member: the next header, not the start of the next large member
_AFTER_DIRECT = 1 << 12
#: Whether :func:`source_for` reads plain files through :class:`WindowBuffer` (maps) instead of :class:`FileBuffer`
#: (``preadv``). None: where ``SHARDSTREAM_MMAP`` is on (the default) and the C header walk prefetches ahead
#: (``_scan.PREFETCH_AHEAD``; without the prefetch the walk stalls on each first touch and the maps cost more CPU than
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


class FileBuffer:
    """The unread bytes of a plain regular file: ``buf[pos:]`` (a memoryview), ``buf[0]`` at offset ``base``
    from where reading started (file offset ``start``).

    The file is read by offset (``os.preadv``, not through the stream object, whose position is left alone)
    into one buffer of ``bufsize`` bytes that is refilled in place: no buffer is allocated per read and every
    byte is copied once out of the page cache, then once more only where it is cut out (a header, a small
    member). Members of :data:`_DIRECT_MIN` bytes or more are read straight into their own ``bytes`` with one
    ``os.pread`` (:meth:`take_direct`), and the read after such a member asks only for :data:`_AFTER_DIRECT`
    bytes, so the start of the next large member is not read twice. A file cut short while it is read ends the
    stream where it ends (as a truncated archive).

    What is sliced out of ``buf`` must be copied (``bytes(...)``) before the next :meth:`fill`. A read that fails
    is raised again by every later fill that asks for more (``failure``), as by :class:`StreamBuffer`.
    """

    __slots__ = ("_stream", "_fd", "_start", "_bufsize", "_ahead", "_mem", "buf", "pos", "base", "eof", "failure")

    def __init__(self, stream: IO[bytes], fd: int, start: int, bufsize: int):
        self._stream = stream  # kept: a file object dropped by its caller would close the descriptor read here
        self._fd, self._start, self._bufsize, self._ahead = fd, start, bufsize, bufsize
        self._mem = memoryview(b"")
        self.buf: memoryview = self._mem
        self.pos = self.base = 0
        self.eof = False
        self.failure: Exception | None = None

    def file_end(self) -> int | None:
        """The size of the file from where reading started: a member reaching past it is truncated."""
        if self._stream.closed:
            return None
        try:
            return os.fstat(self._fd).st_size - self._start
        except OSError:
            return None

    def fill(self, need: int) -> bool:
        """Read until ``need`` bytes are available at ``pos``; False if the file ends first. The buffer grows to
        ``need`` only as far as the file has bytes (a corrupt size allocates nothing more)."""
        avail = len(self.buf) - self.pos
        if avail >= need:
            return True
        if self.failure is not None:
            raise self.failure
        if self.eof:
            return False
        if self._stream.closed:  # its descriptor may be another file's by now
            raise ValueError("read of closed file")
        self.base += self.pos
        return self._refill(need, avail)

    def _refill(self, need: int, avail: int) -> bool:
        """:meth:`fill` once ``base`` has moved to the first unread byte (``buf[pos:]``, ``avail`` bytes)."""
        want = max(self._ahead, need)
        self._ahead = self._bufsize
        mem = self._mem
        if len(mem) < want:  # no larger than what the file still holds (a small file, a corrupt size)
            end = self.file_end()
            if end is not None:
                want = max(min(want, end - self.base), avail, 1)
        if len(mem) < want:
            grown = memoryview(bytearray(max(want, len(mem))))
            grown[:avail] = self.buf[self.pos :]
            mem = self._mem = grown
        elif avail:
            mem[:avail] = self.buf[self.pos :]  # the unread tail moves to the front (memmove)
        self.pos = 0
        try:
            while avail < need:
                got = os.preadv(self._fd, [mem[avail:want]], self._start + self.base + avail)
                if not got:
                    self.eof = True
                    break
                avail += got
        except BaseException as e:
            self.eof = True  # a failed file is not read again; what it gave before failing stays readable
            self.failure = e if isinstance(e, Exception) else None
            raise
        finally:
            self.buf = mem[:avail]
        return avail >= need

    def take_direct(self, start: int, size: int, padded: int) -> bytes | None:
        """The data of a large member whose data begins at ``buf[start]``, read from the file into its own
        ``bytes`` with one ``pread`` (one copy); None when the buffer holds it already, or when the file ends
        before its padding does (the caller then reads it the usual way and reports the damage)."""
        if size < _DIRECT_MIN or len(self.buf) - start >= size:
            return None
        end = self.file_end()
        if end is None or self.base + start + padded > end:
            return None
        data = os.pread(self._fd, size, self._start + self.base + start)
        if len(data) < size:  # cut while being read
            return None
        self.base += start + padded
        self.buf, self.pos, self._ahead = self._mem[:0], 0, _AFTER_DIRECT
        return data


class WindowBuffer(FileBuffer):
    """The unread bytes of a plain regular file as :class:`FileBuffer` gives them, from memory-mapped windows.

    ``buf`` is a read-only memoryview of one map: from the page boundary at or before the first unread byte, about
    ``bufsize`` bytes (more when asked for more), never past the size ``fstat`` reports at that fill. The next fill
    drops it as soon as the next window is mapped (it is unmapped when no view of it is left: nothing is closed under
    a view), so the pages of one window at most are resident and the RSS is what :class:`FileBuffer`'s buffer costs.
    Nothing is copied until a header or member is cut out, and members of :data:`_DIRECT_MIN` bytes or more are read
    by :meth:`take_direct`, as by :class:`FileBuffer`. A file that cannot be mapped is read with ``pread``.

    A file found shorter at a fill than what was mapped of it ends where it now ends (its unread bytes are read
    again, not touched in the map), as a truncated archive. The walks call :meth:`recheck` before they read the
    window again after handing out what they read (a sample, a member: the points where the reader's caller runs
    and may have cut the file), so a shard truncated then ends the same way. What is left is a file cut by another
    process or thread *during* a walk's pass over a window (microseconds of C for each window): that kills the
    process with ``SIGBUS``, as for every memory map. Where shards can be cut under a reader at any moment, set
    ``SHARDSTREAM_MMAP=0`` (``pread``: a cut file is always a truncated archive).
    """

    __slots__ = ("_mapped", "_in_map")

    def __init__(self, stream: IO[bytes], fd: int, start: int, bufsize: int):
        super().__init__(stream, fd, start, bufsize)
        self._mapped = True
        self._in_map = False  # whether buf is a view of a map (else bytes read with pread)

    def recheck(self) -> None:
        """Before the window is read again: if the file is now shorter than what ``buf`` maps of it, ``buf``
        becomes the unread bytes still in the file, read with ``pread`` (the map past the file's end is never
        touched: that is a ``SIGBUS``); the walk then meets the end where the file now ends. One ``fstat``."""
        if not self._in_map or self._stream.closed:
            return
        at = self._start + self.base
        try:
            size = os.fstat(self._fd).st_size
            if size >= at + len(self.buf):
                return
            self.buf = memoryview(os.pread(self._fd, max(size - at - self.pos, 0), at + self.pos))
        except OSError as e:  # nothing more is read from the file: the walk's next fill raises this
            self.buf, self.eof, self.failure = self.buf[self.pos : self.pos], True, e
        self.base += self.pos
        self.pos, self._in_map = 0, False

    def _refill(self, need: int, avail: int) -> bool:
        """Map until ``need`` bytes are available at ``pos`` (see :meth:`FileBuffer.fill`)."""
        self.pos, at, old = 0, self._start + self.base, self.buf
        want, self._ahead = max(self._ahead, need), self._bufsize
        try:
            size = os.fstat(self._fd).st_size
            end = min(at + want, size)
            if size < at + avail:  # cut below what is mapped: what is left is read, the map is not touched there
                self.buf, self._in_map = memoryview(os.pread(self._fd, max(end - at, 0), at)), False
            elif end - at <= avail:  # nothing more in the file: the unread tail stays
                self.buf = old[len(old) - avail :]
            else:
                self.buf = self._window(at, end)
        except BaseException as e:
            self.buf, self.eof = old[len(old) - avail :], True  # a failed file is not read again
            self.failure = e if isinstance(e, Exception) else None
            raise
        del old  # the old window is unmapped here (when no other view of it is left)
        if len(self.buf) < need:
            self.eof = True
            return False
        return True

    def _window(self, at: int, end: int) -> memoryview:
        """File bytes ``at:end``: a view of a new map, or read with ``pread`` where maps fail.

        The pages are put in by the walk's faults (the kernel maps 64 KiB around each): ``MAP_POPULATE`` and
        ``MADV_POPULATE_READ`` measured ~19 % more kernel time per page on Linux 6.18 (they walk every page
        again), and ``mmap`` + ``munmap`` cost ~7 us a window (``bench_read_buffers.py --maps``).
        """
        if self._mapped:
            low = at - at % mmap.ALLOCATIONGRANULARITY
            try:
                window = mmap.mmap(self._fd, end - low, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=low)
            except OSError:  # a file system without maps, or no address space left: pread from here on
                self._mapped = False
            else:
                self._in_map = True
                return memoryview(window)[at - low :]
        self._in_map = False
        return memoryview(os.pread(self._fd, end - at, at))


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
    return getattr(_scan, "PREFETCH_AHEAD", 0) > 0 and not settings.no_extensions


def _is_plain_file(stream: IO[bytes]) -> bool:
    """A regular file opened for reading (not a pipe, socket or decompressor): cheap to seek back in."""
    if not isinstance(stream, (io.BufferedReader, io.FileIO)):
        return False
    try:
        return stream.seekable()
    except (OSError, ValueError):
        return False
