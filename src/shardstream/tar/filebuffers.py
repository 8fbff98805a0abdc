"""Plain regular files read by offset: :class:`FileBuffer` (``preadv`` into one reused buffer) and
:class:`WindowBuffer` (memory-mapped windows), the :class:`~shardstream.tar.buffers.Source` objects that
:func:`~shardstream.tar.buffers.source_for` gives local shards. Both read members of :data:`_DIRECT_MIN` bytes or
more straight into their own ``bytes`` (:meth:`FileBuffer.take_direct`).

>>> import os, tempfile
>>> fd, path = tempfile.mkstemp()
>>> _ = os.write(fd, b"abcdef")
>>> with open(path, "rb") as f:
...     src = FileBuffer(f, f.fileno(), 0, 4)
...     src.fill(5), bytes(src.buf[src.pos : src.pos + 5])
(True, b'abcde')
>>> os.close(fd); os.remove(path)
"""

from __future__ import annotations

import mmap
import os
from typing import IO

__all__ = ["FileBuffer", "WindowBuffer"]

#: members at least this large are read from plain seekable files straight into their own bytes (one copy)
_DIRECT_MIN = 1 << 20
#: what :class:`FileBuffer` reads after a large member: the next header, not the start of the next large member
_AFTER_DIRECT = 1 << 12


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
