"""The deterministic tar writer: ustar headers, PAX records only where ustar cannot say it, GNU-tar record padding.

:class:`TarStreamWriter` appends regular-file members to a binary stream. The bytes depend only on the member
names, their data and the writer's settings, never on the clock, the user or the platform:

- every member is a regular file (typeflag ``'0'``) with mode ``0o444``, uid/gid 0, user and group name
  ``"bigdata"`` (webdataset's defaults) and mtime 0; all four are settable;
- plain POSIX ustar headers (magic ``"ustar\\0" "00"``), device fields left empty as Python's ``tarfile``
  writes them; names of up to 100 bytes go in the *name* field, longer ones are split at a ``/`` into
  *prefix* (at most 155 bytes) and *name* (at most 100), choosing the shortest prefix as ``tarfile`` does;
  names are UTF-8 (undecodable ``surrogateescape`` characters written back as their bytes);
- a PAX extended header (typeflag ``'x'``, named ``"././@PaxHeader"`` as ``tarfile`` names it) precedes a
  member only when ustar cannot express it: a name that does not fit the name/prefix fields (``path``
  record; the ustar name field then holds the first 100 bytes of the name, cut at a character boundary), or
  data of 8 GiB or more (``size`` record; the ustar size field then also holds the size in GNU base-256, so
  readers without PAX support stay in step);
- member data is padded with NULs to a multiple of 512 bytes; :meth:`TarStreamWriter.close` writes the two
  zero blocks that end an archive and pads the archive to a multiple of :data:`RECORDSIZE` (10240 bytes),
  exactly as GNU tar (default blocking factor 20) and Python's ``tarfile`` do.

For names that fit ustar, the output is byte-identical to Python's ``tarfile`` (``format=USTAR_FORMAT``) with
the same member settings, which is what webdataset's ``TarWriter(..., mtime=0)`` writes.

>>> import io, tarfile
>>> out = io.BytesIO()
>>> tw = TarStreamWriter(out)
>>> tw.add("sample0.txt", b"hello")  # the offset of the data in the archive
512
>>> tw.add("sample0.cls", b"3")
1536
>>> tw.close()
>>> len(out.getvalue()), tw.bytes_written
(10240, 10240)
>>> [(m.name, m.size, m.mode, m.uname) for m in tarfile.open(fileobj=io.BytesIO(out.getvalue()))]
[('sample0.txt', 5, 292, 'bigdata'), ('sample0.cls', 1, 292, 'bigdata')]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, BinaryIO
from zlib import adler32 as _adler32

from ..errors import ConfigError
from . import reader
from .accel import member_packer
from .header import BLOCKSIZE, checksum

__all__ = ["DEFAULT_OWNER", "PAX_SIZE_LIMIT", "RECORDSIZE", "TarStreamWriter", "archive_size", "member_header",
           "member_size"]  # fmt: skip

#: The archive is padded to a multiple of this many bytes on close (GNU tar's and ``tarfile``'s record size).
RECORDSIZE = 20 * BLOCKSIZE
#: Members of this many bytes or more need a PAX ``size`` record (the 11 octal digits of ustar end below it).
PAX_SIZE_LIMIT = 8**11
#: Default user and group name, as webdataset's ``TarWriter`` writes them.
DEFAULT_OWNER = "bigdata"

_NAME, _PREFIX = 100, 155
_ZEROS = bytes(RECORDSIZE)
_NAME_PADS = tuple(bytes(n) for n in range(_NAME + 1))
_PADS = tuple(bytes(n) for n in range(BLOCKSIZE))
_BUFSIZE = 1 << 20  # buffered bytes before a write to the stream
_DIRECT = 1 << 18  # data of at least this size is written straight from the caller's buffer, not copied


def _encode_name(name: str | bytes) -> bytes:
    """The bytes of a member name (UTF-8; ``surrogateescape`` characters back to their raw bytes)."""
    raw = name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
    if not raw or b"\0" in raw:
        raise ConfigError(f"a tar member name must be non-empty and contain no NUL byte, got {name!r}")
    return raw


def _split_name(raw: bytes) -> tuple[bytes, bytes] | None:
    """Split a name into ustar (prefix, name) fields, shortest prefix first as ``tarfile`` does; None if it cannot."""
    if len(raw) <= _NAME:
        return b"", raw
    if len(raw) > _PREFIX + 1 + _NAME:
        return None
    slash = raw.find(b"/", 1)  # never split at a leading '/': an empty prefix would lose it
    while 0 < slash <= _PREFIX:
        if len(raw) - slash - 1 <= _NAME:
            return raw[:slash], raw[slash + 1 :]
        slash = raw.find(b"/", slash + 1)
    return None


def _cut_utf8(raw: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of ``raw``, shortened so that no UTF-8 character is cut in half."""
    if len(raw) <= limit:
        return raw
    end = limit
    while end > 0 and raw[end] & 0xC0 == 0x80:  # raw[end] continues a character: back off to its start
        end -= 1
    return raw[:end]


def _template(typeflag: bytes, mode: int, mtime: int, uname: bytes, gname: bytes) -> bytes:
    """A header block with every field filled except name, size, prefix and checksum."""
    block = bytearray(BLOCKSIZE)
    block[100:108] = b"%07o\0" % mode
    block[108:116] = block[116:124] = b"0000000\0"  # uid, gid
    block[136:148] = b"%011o\0" % mtime
    block[148:156] = b" " * 8
    block[156:157] = typeflag
    block[257:265] = b"ustar\x0000"
    block[265 : 265 + len(uname)] = uname
    block[297 : 297 + len(gname)] = gname
    return bytes(block)


def _block(template: bytes, name: bytes, prefix: bytes, size: int) -> bytearray:
    """Fill name, prefix and size into ``template`` and set the checksum."""
    block = bytearray(template)
    block[0 : len(name)] = name
    if prefix:
        block[345 : 345 + len(prefix)] = prefix
    if size < PAX_SIZE_LIMIT:
        block[124:136] = b"%011o\0" % size
    else:  # GNU base-256: high bit of the first byte set, big-endian value in the remaining 11 bytes
        block[124:136] = b"\x80" + size.to_bytes(11, "big")
    block[148:156] = b"%06o\0 " % checksum(block)
    return block


def _pax_record(keyword: str, value: bytes) -> bytes:
    """One ``"LEN keyword=value\\n"`` record; LEN counts itself."""
    body = b" " + keyword.encode("ascii") + b"=" + value + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length = len(str(length)) + len(body)
    return str(length).encode("ascii") + body


_PAX_TEMPLATE = _template(b"x", 0, 0, b"", b"")


def _pax_header(raw_name: bytes | None, size: int | None) -> bytes:
    records = b""
    if raw_name is not None:
        try:
            raw_name.decode("utf-8")
        except UnicodeDecodeError:  # undecodable bytes: declare them as such (POSIX hdrcharset)
            records += _pax_record("hdrcharset", b"BINARY")
        records += _pax_record("path", raw_name)
    if size is not None:
        records += _pax_record("size", b"%d" % size)
    pad = -len(records) % BLOCKSIZE
    return bytes(_block(_PAX_TEMPLATE, b"././@PaxHeader", b"", len(records))) + records + _ZEROS[:pad]


def _owner(name: str, what: str) -> bytes:
    raw = name.encode("utf-8")
    if len(raw) > 32 or b"\0" in raw:
        raise ConfigError(f"the tar {what} name must be at most 32 bytes without NUL, got {name!r}")
    return raw


def _check_settings(mtime: Any, mode: Any) -> tuple[int, int]:
    if isinstance(mtime, bool) or not isinstance(mtime, (int, float)) or not 0 <= int(mtime) < 8**11:
        raise ConfigError(f"mtime must be a number of seconds in [0, 8**11), got {mtime!r}")
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ConfigError(f"mode must be an int in [0, 0o7777] (e.g. 0o444), got {mode!r}")
    return int(mtime), mode


def member_header(
    name: str | bytes,
    size: int,
    *,
    mtime: int = 0,
    mode: int = 0o444,
    uname: str = DEFAULT_OWNER,
    gname: str = DEFAULT_OWNER,
) -> bytes:
    """The header bytes :class:`TarStreamWriter` writes before a member's data: one ustar block, or a PAX header
    (two or more blocks) followed by the ustar block when the name or the size does not fit ustar.

    >>> len(member_header("a.txt", 5)), len(member_header("d/" * 60 + "a.txt", 5)), len(member_header("x" * 300, 5))
    (512, 512, 1536)
    >>> big = member_header("huge.bin", 9 * 2**30)
    >>> big[156:157], len(big)  # a PAX header first: the size does not fit 11 octal digits
    (b'x', 1536)
    """
    raw = _encode_name(name)
    mtime, mode = _check_settings(mtime, mode)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ConfigError(f"a member size must be a non-negative int, got {size!r}")
    return bytes(_header(_template(b"0", mode, mtime, _owner(uname, "user"), _owner(gname, "group")), raw, size))


def _header(template: bytes, raw: bytes, size: int) -> bytes | bytearray:
    split = _split_name(raw)
    if split is not None and size < PAX_SIZE_LIMIT:
        return _block(template, split[1], split[0], size)
    pax = _pax_header(raw if split is None else None, size if size >= PAX_SIZE_LIMIT else None)
    prefix, name = split if split is not None else (b"", _cut_utf8(raw, _NAME))
    return pax + _block(template, name, prefix, size)


def _header_size(raw: bytes, size: int) -> int:
    if size < PAX_SIZE_LIMIT and (len(raw) <= _NAME or _split_name(raw) is not None):
        return BLOCKSIZE
    return len(_header(_PAX_TEMPLATE, raw, size))  # the template does not change the length


def member_size(name: str | bytes, size: int) -> int:
    """The bytes a member of ``size`` data bytes named ``name`` takes in the archive: headers, data, padding.

    >>> member_size("a.txt", 5), member_size("a.txt", 512), member_size("x" * 300, 0)
    (1024, 1024, 1536)
    """
    return _header_size(_encode_name(name), size) + size + (-size % BLOCKSIZE)


def archive_size(offset: int) -> int:
    """The size of an archive closed after ``offset`` bytes of members: two zero blocks, then record padding.

    >>> archive_size(0), archive_size(9216), archive_size(9217)
    (10240, 10240, 20480)
    """
    end = offset + 2 * BLOCKSIZE
    return end + (-end % RECORDSIZE)


def _as_buffer(data: Any) -> bytes | memoryview:
    """``data`` as bytes or a flat byte memoryview (no copy unless the buffer is not contiguous)."""
    if isinstance(data, bytes):
        return data
    try:
        view = memoryview(data)
    except TypeError:
        raise ConfigError(f"tar member data must be bytes-like, got {type(data).__name__}") from None
    if view.c_contiguous:
        return view.cast("B") if view.format != "B" or view.ndim != 1 else view
    return view.tobytes()


class TarStreamWriter:
    """Append regular-file members to a binary stream as a deterministic tar archive (see the module docstring).

    ``fileobj`` needs only ``write`` (partial writes of raw streams are completed). Writes are buffered in
    1 MiB chunks; large member data goes to the stream without a copy. :meth:`close` ends the archive and
    flushes, but never closes ``fileobj``: the caller owns it.

    :param fileobj: binary stream to write to
    :param mtime: modification time of every member (seconds since the epoch, an int below 8**11)
    :param mode: permission bits of every member
    :param uname: user name of every member (uid is always 0)
    :param gname: group name of every member (gid is always 0)

    >>> import io
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out, mtime=1700000000) as tw:
    ...     offset = tw.add("k/0001.json", b'{"a": 1}')
    >>> offset, tw.bytes_written, out.getvalue()[offset:offset + 8]
    (512, 10240, b'{"a": 1}')
    """

    def __init__(
        self,
        fileobj: BinaryIO,
        *,
        mtime: int = 0,
        mode: int = 0o444,
        uname: str = DEFAULT_OWNER,
        gname: str = DEFAULT_OWNER,
    ):
        mtime, mode = _check_settings(mtime, mode)
        self.fileobj = fileobj
        self.mtime, self.mode, self.uname, self.gname = mtime, mode, uname, gname
        template = self._template = _template(b"0", mode, mtime, _owner(uname, "user"), _owner(gname, "group"))
        # The fast path assembles a header from the template's constant parts around the name and size fields;
        # its checksum is the template's (whose name and size fields are NUL) plus the bytes of those two fields.
        self._before_size, self._mtime_field = template[100:124], template[136:148]
        self._after_checksum = template[156:]
        self._base_checksum = checksum(template)
        self._buf = bytearray()
        self._pos = 0  # bytes handed to this writer so far (buffered or written)
        self.closed = False

    @property
    def bytes_written(self) -> int:
        """Bytes of archive produced so far (some may still sit in the buffer until :meth:`flush`)."""
        return self._pos

    def add(self, name: str | bytes, data: Any) -> int:
        """Append one regular file; returns the offset of its data in the archive (for indexes).

        ``name`` is a str (written as UTF-8) or bytes; ``data`` is any bytes-like object (bytes, bytearray,
        memoryview, a contiguous numpy array...).

        >>> import io
        >>> tw = TarStreamWriter(io.BytesIO())
        >>> tw.add("a.txt", b"x"), tw.add("b.txt", bytearray(600)), tw.bytes_written
        (512, 1536, 2560)
        """
        return self.add_many(((name, data),))[0]

    def add_many(self, members: Iterable[tuple[str | bytes, Any]]) -> list[int]:
        """Append several regular files ``(name, data)``; returns the offsets of their data. Same as calling
        :meth:`add` for each, with less overhead per member (this is the writer's hot loop).

        >>> import io
        >>> TarStreamWriter(io.BytesIO()).add_many([("k.cls", b"1"), ("k.txt", b"hello")])
        [512, 1536]
        """
        if self.closed:
            raise ConfigError("this TarStreamWriter is closed; create a new one to write another archive")
        pack = member_packer() if reader.accelerated() else None
        if pack is not None and members.__class__ is list:  # the C twin of the loop below (same bytes)
            buf, before = self._buf, len(self._buf)
            packed = pack(buf, self._pos, self._template, members, _DIRECT)
            if packed is not None:
                self._pos += len(buf) - before
                if len(buf) >= _BUFSIZE:
                    self.flush()
                return packed
        offsets = []
        buf, pos = self._buf, self._pos
        base, before_size, mtime_field, after = self._base_checksum, self._before_size, self._mtime_field, self._after_checksum
        for name, data in members:
            raw = name if name.__class__ is bytes and name and b"\0" not in name else _encode_name(name)
            if data.__class__ is not bytes:
                data = _as_buffer(data)
            size = len(data)
            if size < PAX_SIZE_LIMIT and len(raw) <= _NAME:  # the common case: one ustar block in one join
                size_field = b"%011o\0" % size
                # adler32 from 0 keeps the plain byte sum in its low 16 bits while below 65521 (<= 100 bytes)
                total = base + (_adler32(raw, 0) & 0xFFFF) + (_adler32(size_field, 0) & 0xFFFF)
                buf += b"".join(
                    (raw, _NAME_PADS[_NAME - len(raw)], before_size, size_field, mtime_field, b"%06o\0 " % total, after)
                )  # fmt: skip
                pos += BLOCKSIZE
            else:
                header = _header(self._template, raw, size)
                buf += header
                pos += len(header)
            offsets.append(pos)
            pad = -size % BLOCKSIZE
            if size < _DIRECT:
                buf += data
                if pad:
                    buf += _PADS[pad]
                if len(buf) >= _BUFSIZE:
                    self._buf = buf
                    self.flush()
                    buf = self._buf
            else:
                self._buf = buf
                self.flush()
                self._write_all(data)
                buf = self._buf
                if pad:
                    buf += _PADS[pad]
            pos += size + pad
            self._pos = pos  # kept current: a failing write leaves an accurate count
        self._buf = buf
        return offsets

    def flush(self) -> None:
        """Hand the buffered bytes to ``fileobj`` (without calling ``fileobj.flush()``)."""
        if self._buf:
            buf, self._buf = self._buf, bytearray()
            self._write_all(buf)

    def _write_all(self, data: bytes | bytearray | memoryview) -> None:
        write = self.fileobj.write
        written = write(data)
        if written is None or written >= len(data):  # buffered streams write everything (or return None)
            return
        view = memoryview(data).cast("B")[written:]
        while view:
            written = write(view)
            if written is None:
                return
            view = view[written:]

    def close(self) -> None:
        """Write the end of the archive (two zero blocks and padding to :data:`RECORDSIZE`) and flush.

        Does not close ``fileobj``. Calling it again does nothing.
        """
        if self.closed:
            return
        end = archive_size(self._pos) - self._pos
        self._buf += _ZEROS[:end]
        self._pos += end
        self.closed = True
        self.flush()

    def __enter__(self) -> TarStreamWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:  # leave the caller's stream as it is: an end-of-archive would make a broken archive look complete
            self.closed = True
