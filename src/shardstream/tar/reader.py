"""Stream the regular-file members of an (uncompressed) tar archive: ``(name, data, data_offset)`` tuples.

The reader reads large chunks (``bufsize``) from any binary stream (files, pipes, sockets with short reads:
nothing needs ``seek``) and slices members out of them. Supported: POSIX ustar, GNU (``L`` long names, ``K``
long link names), PAX (``x`` per-member and ``g`` global headers: ``path`` and ``size``), v7, GNU
base-256 sizes. Directories, links, devices and fifos are skipped; other unknown types are skipped with
their data. GNU sparse members raise, since their data cannot be returned as stored.

The header walk has two implementations that give identical results: a pure-Python one, and the optional C
extension (``shardstream._native._scan``, reached through :mod:`~shardstream.tar.accel`) which walks runs of plain headers (including PAX ``x`` and GNU ``L``)
inside the current buffer and hands back to Python at anything else. Errors and end-of-archive are always
handled by the Python code, so messages do not depend on which path is in use.

End of archive: two zero blocks end it (nothing after them is read). A stream that stops cleanly between
members, or after a single zero block, ends the iteration with a :class:`TruncatedTarWarning`; a stream
that stops inside a header or inside member data (padding included) raises
:class:`~shardstream.errors.TarFormatError` naming the url and offset.

>>> import io, tarfile
>>> buf = io.BytesIO()
>>> with tarfile.open(fileobj=buf, mode="w") as tf:
...     info = tarfile.TarInfo("s0.txt"); info.size = 2
...     tf.addfile(info, io.BytesIO(b"hi"))
>>> list(iter_members(io.BytesIO(buf.getvalue())))
[('s0.txt', b'hi', 512)]
"""

from __future__ import annotations

import mmap
import warnings
from collections.abc import Iterator
from typing import IO, Any

from ..config import get_settings
from ..errors import ConfigError, TarFormatError, add_context
from . import accel
from .buffers import _DIRECT_MIN, MappedBuffer, Source, StreamBuffer, map_file, source_for
from .header import (
    BLOCKSIZE,
    GNU_LONGLINK,
    GNU_LONGNAME,
    GNU_SPARSE,
    MAX_MEMBER_SIZE,
    NO_DATA_TYPES,
    PAX_GLOBAL,
    PAX_HEADER,
    REGULAR_TYPES,
    not_a_tar,
    parse_header,
    parse_pax_records,
)

__all__ = [
    "AHEAD",
    "USE_ACCELERATOR",
    "MappedBuffer",
    "StreamBuffer",
    "TruncatedTarWarning",
    "accelerated",
    "iter_announced",
    "iter_members",
    "iter_members_mapped",
    "map_file",
    "walk",
]

#: Module switch: use the C header walk when it is built (tests flip it; ``accelerate=`` overrides it per call).
USE_ACCELERATOR = not get_settings().no_extensions

Member = tuple[str, bytes, int]
#: The C walk: ``scan(buf, pos, base, headers_only=False) -> (members, new_pos)``; see ``_native/_scan_walk.c``.
Scan = accel.Scan
_ZERO_BLOCK = bytes(BLOCKSIZE)


class _Ahead:
    """The type of :data:`AHEAD`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "AHEAD"


#: The data of a member announced by ``walk(..., announce=True)``: its header is read, its data is still to come.
AHEAD: Any = _Ahead()
_EXTENDED_TYPES = frozenset((GNU_LONGNAME, GNU_LONGLINK, PAX_HEADER, PAX_GLOBAL))


class TruncatedTarWarning(UserWarning):
    """A tar stream ended between members (or after one zero block) without the end-of-archive marker.

    Every member was complete, so iteration ends normally; the shard was probably cut short when written.
    """


def accelerated() -> bool:
    """Whether :func:`iter_members` uses the C header walk by default (built, and :data:`USE_ACCELERATOR` on).

    >>> isinstance(accelerated(), bool)
    True
    """
    return USE_ACCELERATOR and accel.built()


def iter_members(
    stream: IO[bytes], url: str = "<stream>", *, bufsize: int = 1 << 20, accelerate: bool | None = None
) -> Iterator[Member]:
    """Yield ``(name, data, data_offset)`` for each regular file of a tar stream, in archive order.

    ``data_offset`` is where the member's data starts in the stream. Names are decoded as UTF-8, undecodable
    bytes kept with ``surrogateescape``. ``accelerate`` chooses the C path (``True``), the pure-Python path
    (``False``) or the default (``None``: :func:`accelerated`). Raises
    :class:`~shardstream.errors.TarFormatError` on any corruption or truncation inside a member.

    >>> import io
    >>> from shardstream.tar.writer import TarStreamWriter
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     _ = tw.add("a.txt", b"x"), tw.add("a.cls", b"")
    >>> list(iter_members(io.BytesIO(out.getvalue()), "a.tar", accelerate=False))
    [('a.txt', b'x', 512), ('a.cls', b'', 1536)]
    """
    if bufsize < 1:
        raise ConfigError(f"bufsize must be a positive number of bytes, got {bufsize!r}")
    scan = member_scan(accelerate)
    return walk(source_for(stream, bufsize, windows=scan is not None), url, scan)


def iter_announced(
    stream: IO[bytes], url: str = "<stream>", *, bufsize: int = 1 << 20, accelerate: bool | None = None
) -> Iterator[Member]:
    """:func:`iter_members` that also yields ``(name, AHEAD, data_offset)`` for a member whose header has arrived
    and whose data has not (``walk(..., announce=True)``): the members of a stream for the sample grouping, which
    can then close a sample without waiting for the next one's data.

    >>> import io
    >>> from shardstream.tar.writer import TarStreamWriter
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     _ = tw.add("a.txt", b"x"), tw.add("b.txt", b"y")
    >>> list(iter_announced(io.BytesIO(out.getvalue()), "a.tar", bufsize=512, accelerate=False))
    [('a.txt', AHEAD, 512), ('a.txt', b'x', 512), ('b.txt', AHEAD, 1536), ('b.txt', b'y', 1536)]
    """
    if bufsize < 1:
        raise ConfigError(f"bufsize must be a positive number of bytes, got {bufsize!r}")
    scan = member_scan(accelerate)
    return walk(source_for(stream, bufsize, windows=scan is not None), url, scan, announce=True)


def member_scan(accelerate: bool | None) -> Scan | None:
    """The C header walk for ``accelerate`` (None: :func:`accelerated`), or None for the pure-Python walk.

    Raises :class:`~shardstream.errors.ConfigError` when ``accelerate`` is True and the extension is not built.
    """
    if accelerate and not accel.built():
        raise ConfigError("accelerate=True, but the C extension shardstream._native._scan is not built")
    use_c = accelerated() if accelerate is None else accelerate
    return accel.header_walk() if use_c else None


def iter_members_mapped(
    buffer: Any, url: str = "<buffer>", *, accelerate: bool | None = None
) -> Iterator[tuple[str, memoryview, int]]:
    """:func:`iter_members` over an uncompressed tar held in ``buffer`` (an ``mmap``, ``bytes`` or a
    ``bytearray``), with every member's data a read-only ``memoryview`` into ``buffer``: no data is copied.

    The same names, offsets, errors and warnings as :func:`iter_members` on the same bytes (the header walk is
    the same; only the data is sliced instead of copied). A view keeps ``buffer`` alive; ``bytes(view)`` copies.

    >>> import io
    >>> from shardstream.tar.writer import TarStreamWriter
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     _ = tw.add("a.txt", b"hello"), tw.add("a.cls", b"7")
    >>> [(name, bytes(view), offset) for name, view, offset in iter_members_mapped(out.getvalue(), "a.tar")]
    [('a.txt', b'hello', 512), ('a.cls', b'7', 1536)]
    """
    if not isinstance(buffer, (bytes, bytearray, mmap.mmap)):
        raise ConfigError(f"iter_members_mapped needs bytes, a bytearray or an mmap, not {type(buffer).__name__}")
    view, src = memoryview(buffer), MappedBuffer(buffer)
    for name, offset, size in walk(src, url, member_scan(accelerate), data=False, stacklevel=3):
        yield name, view[offset : offset + size], offset


class _Pending:
    """Extended headers (``L``, ``K``, ``x``) read so far that apply to the next member header."""

    __slots__ = ("offset", "longname", "pax")

    def __init__(self, offset: int):
        self.offset = offset
        self.longname = b""
        self.pax: dict[str, bytes] = {}


def walk(src: Source, url: str, scan: Scan | None, *, data: bool = True, stacklevel: int = 2,
         announce: bool = False) -> Iterator[Any]:
    """The header walk from ``src.pos`` (a member boundary): C runs between extended headers when ``scan`` is
    given, Python for one header at a time, and every error and end-of-archive decision.

    ``data=True`` yields ``(name, data, data_offset)``; ``data=False`` yields ``(name, data_offset, size)`` and
    jumps over member data (the header-only index, :mod:`shardstream.tar.index`). ``stacklevel`` is that of the
    :class:`TruncatedTarWarning`, as seen from the frame that iterates this generator.

    ``announce=True`` (with ``data``): a regular member whose data the buffer does not hold yet is first yielded as
    ``(name, AHEAD, data_offset)``, before the walk waits for its data, then as usual. The sample grouping
    (:mod:`shardstream.samples`) then hands out the sample before it as soon as its header shows a new key, not
    after the next member's data has arrived (a remote shard's first sample, a slow pipe).
    """
    pending: _Pending | None = None
    global_pax: dict[str, bytes] = {}
    active = scan  # None while global PAX records change members, which the C walk does not apply
    # a mapped window (WindowBuffer): whether the file is still as long is checked before the window is read again
    # after members were handed out (the caller ran, and may have cut the file)
    recheck = getattr(src, "recheck", None)
    handed_out = True  # the caller may have run since the buffer was filled
    while True:
        if handed_out and recheck is not None:
            recheck()
        handed_out = False
        if active is not None and pending is None:
            found, src.pos = active(src.buf, src.pos, src.base, not data)
            if found:
                if data:
                    yield from found
                else:
                    for name, size, data_offset in found:
                        yield name, data_offset, size
                if recheck is not None:
                    recheck()
        offset = src.base + src.pos
        if not src.fill(BLOCKSIZE):
            warnings.warn(_end_of_stream(src, url, offset, pending), stacklevel=stacklevel)
            return
        block = bytes(src.buf[src.pos : src.pos + BLOCKSIZE])  # a copy: a file's buffer is refilled in place
        if block == _ZERO_BLOCK:
            warning = _end_of_archive(src, url, offset, pending)
            if warning is not None:
                warnings.warn(warning, stacklevel=stacklevel)
            return
        try:
            header = parse_header(block, url=url, offset=offset)
        except TarFormatError as error:  # the first block: maybe not a tar at all (a JPEG, an error page...)
            other = not_a_tar(block, url=url) if offset == 0 else None
            if other is None:
                raise
            raise other from error
        typeflag = header.typeflag
        if typeflag == PAX_GLOBAL:  # applies to every later member
            global_pax.update(parse_pax_records(_take(src, header.size, url, offset), url=url, offset=offset))
            active = None if _changes_members(global_pax) else scan
            continue
        if typeflag in _EXTENDED_TYPES:
            records = _take(src, header.size, url, offset)
            if pending is None:
                pending = _Pending(offset)
            if typeflag == GNU_LONGNAME:
                pending.longname = records.split(b"\0", 1)[0]
            elif typeflag == PAX_HEADER:
                pending.pax.update(parse_pax_records(records, url=url, offset=offset))
            continue
        name, size = header.name, header.size
        if pending is not None or global_pax:
            pax = {**global_pax, **pending.pax} if pending is not None else global_pax
            name, size = _apply_extended(pax, pending, name, size, url, offset)
            pending = None
        if typeflag in REGULAR_TYPES:
            text = name.decode("utf-8", "surrogateescape")
            if announce and not src.eof and len(src.buf) - src.pos < BLOCKSIZE + size:
                yield text, AHEAD, offset + BLOCKSIZE  # its data is still to come: the grouping may close a sample
            if data:
                try:
                    member = _take(src, size, url, offset, text)
                except _PaddingCut as cut:  # the last member is whole: hand it out, then report the damage
                    yield text, cut.data, offset + BLOCKSIZE
                    raise cut.error from cut.error.__cause__
                yield text, member, offset + BLOCKSIZE
            else:
                try:
                    _take(src, size, url, offset, text, keep=False)
                except _PaddingCut as cut:
                    yield text, offset + BLOCKSIZE, size
                    raise cut.error from cut.error.__cause__
                yield text, offset + BLOCKSIZE, size
            handed_out = True
        elif typeflag in NO_DATA_TYPES:  # POSIX: no data blocks follow links, devices, directories, fifos
            src.pos += BLOCKSIZE
        elif typeflag == GNU_SPARSE:
            raise _sparse_error(url, offset, name)
        else:  # unknown or vendor types (GNU 'V' volume label, 'D' dump directory...): skip their data
            try:
                _take(src, size, url, offset, name.decode("utf-8", "surrogateescape"), keep=False)
            except _PaddingCut as cut:
                raise cut.error from cut.error.__cause__


def _changes_members(pax: dict[str, bytes]) -> bool:
    """Whether global PAX records change how members read (the C walk assumes they do not)."""
    return bool(pax.get("path") or pax.get("size")) or any(key.startswith("GNU.sparse.") for key in pax)


def _apply_extended(
    pax: dict[str, bytes], pending: _Pending | None, name: bytes, size: int, url: str, offset: int
) -> tuple[bytes, int]:
    """The name and size of a member after its PAX records and GNU long name (PAX wins, as in GNU tar)."""
    if any(key.startswith("GNU.sparse.") for key in pax):
        raise _sparse_error(url, offset, name)
    name = pax.get("path") or (pending.longname if pending is not None else b"") or name
    size_text = pax.get("size")
    if size_text:
        if not size_text.isdigit() or int(size_text) > MAX_MEMBER_SIZE:
            raise TarFormatError(f"bad PAX size {size_text[:32]!r}", url=url, offset=offset)
        size = int(size_text)
    return name, size


def _sparse_error(url: str, offset: int, name: bytes) -> TarFormatError:
    return TarFormatError(
        "GNU sparse members are not supported (rebuild the shard from regular files)",
        url=url,
        offset=offset,
        member=name.decode("utf-8", "surrogateescape"),
    )


class _PaddingCut(Exception):
    """Raised by :func:`_take` when a member's data is whole but its padding is cut: the data, then the error."""

    def __init__(self, data: Any, error: TarFormatError):
        super().__init__("padding cut")
        self.data, self.error = data, error


def _take(src: Source, size: int, url: str, offset: int, member: str | None = None, *, keep: bool = True) -> bytes:
    """Consume the header at ``src.pos`` and its ``size`` data bytes plus padding; return the data (``b""``
    without ``keep``: then the data is only checked to be there, never copied)."""
    padded = (size + BLOCKSIZE - 1) & ~(BLOCKSIZE - 1)
    if size >= _DIRECT_MIN:
        file_end = getattr(src, "file_end", None)  # a local file knows its size: a huge size field is refused
        end = file_end() if file_end is not None else None  # before anything is read or allocated for it
        if end is not None and src.base + src.pos + BLOCKSIZE + size > end:  # (a cut padding is handled below)
            raise _truncated(size, padded, end, url, offset, member)
        if keep:
            data = src.take_direct(src.pos + BLOCKSIZE, size, padded)
            if data is not None:
                return data
    error: TarFormatError | None = None
    try:
        filled = src.fill(BLOCKSIZE + padded)
    except TarFormatError as e:  # the (decompressed) stream broke inside this member: say which one
        filled, error = False, add_context(e, member=member, offset=offset)  # type: ignore[assignment]
    if not filled:
        if error is None:
            error = _truncated(size, padded, src.base + len(src.buf), url, offset, member)
        start = src.pos + BLOCKSIZE
        if member is not None and len(src.buf) - start >= size:  # only padding is missing: the data is whole
            src.pos = len(src.buf)
            raise _PaddingCut(bytes(src.buf[start : start + size]) if keep else b"", error)
        raise error
    start = src.pos + BLOCKSIZE
    src.pos = start + padded
    return bytes(src.buf[start : start + size]) if keep else b""


def _truncated(size: int, padded: int, end: int, url: str, offset: int, member: str | None) -> TarFormatError:
    return TarFormatError(
        f"truncated tar member: {size} data bytes (padded to {padded}) expected after the header, "
        f"but the stream ends at offset {end}",
        url=url,
        offset=offset,
        member=member,
    )


def _unterminated(url: str, offset: int, detail: str = "") -> TruncatedTarWarning:
    return TruncatedTarWarning(
        f"tar stream {url!r} ends at offset {offset}{detail} without the end-of-archive marker "
        "(two zero blocks); all its members are complete, but it may have been cut short"
    )


def _end_of_stream(src: Source, url: str, offset: int, pending: _Pending | None) -> TruncatedTarWarning:
    """The stream ended where a header should start: the warning to give at a member boundary, else raise."""
    partial = len(src.buf) - src.pos
    if offset == 0 and (error := not_a_tar(bytes(src.buf[src.pos:]), url=url, whole=False)) is not None:
        raise error  # empty, or a short page or file of another kind
    if partial:
        problem = f"truncated tar header: the stream ends after {partial} of its {BLOCKSIZE} bytes"
        raise TarFormatError(problem, url=url, offset=offset)
    if pending is not None:
        problem = "truncated tar archive: an extended header is not followed by its member"
        raise TarFormatError(problem, url=url, offset=pending.offset)
    return _unterminated(url, offset)


def _end_of_archive(src: Source, url: str, offset: int, pending: _Pending | None) -> TruncatedTarWarning | None:
    """A zero block at ``offset``: the end-of-archive marker (None), its first half at the stream's end (a
    warning, as GNU tar and ``tarfile`` stop at one zero block), or corruption (raise)."""
    if pending is not None:
        problem = "end of archive right after an extended header: its member is missing"
        raise TarFormatError(problem, url=url, offset=pending.offset)
    src.pos += BLOCKSIZE
    complete = src.fill(BLOCKSIZE)
    second = bytes(src.buf[src.pos : src.pos + BLOCKSIZE])
    if second.count(0) != len(second):
        problem = "a lone zero block followed by more data: the archive is corrupt in the middle"
        raise TarFormatError(problem, url=url, offset=offset)
    return None if complete else _unterminated(url, offset + BLOCKSIZE, " after a single zero block")
