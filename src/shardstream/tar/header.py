"""One tar header block: constants, the checksum, numeric fields, and PAX extended-header records.

Three header dialects are read: POSIX ustar (magic ``"ustar\\0" "00"``, long names split into *prefix* and
*name*), GNU (magic ``"ustar  \\0"``; the prefix area holds other data, long names use ``L`` members) and
old v7 headers without a magic. Numeric fields are octal text, or GNU base-256 binary when the first byte
has its high bit set (sizes of 8 GiB and more).

>>> block = bytearray(BLOCKSIZE)
>>> block[0:5] = b"a.txt"
>>> block[124:136] = b"00000000003\\0"
>>> block[156:157] = b"0"
>>> block[148:156] = b"%06o\\0 " % checksum(block)
>>> parse_header(bytes(block))
Header(name=b'a.txt', size=3, typeflag=48)
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

from ..errors import ConfigError, NotATarError, TarFormatError

__all__ = [
    "BLOCKSIZE",
    "MAX_MEMBER_SIZE",
    "NO_DATA_TYPES",
    "REGULAR_TYPES",
    "Header",
    "checksum",
    "not_a_tar",
    "parse_header",
    "parse_number",
    "parse_pax_records",
]

#: Size of a tar block: headers are one block, member data is padded to a multiple of it.
BLOCKSIZE = 512
#: Largest member size accepted (256 TiB); anything bigger is a corrupt size field, not a real member.
MAX_MEMBER_SIZE = 1 << 48

# Typeflags, as byte values (``block[156]``).
REGTYPE, AREGTYPE, DIRTYPE, CONTTYPE = ord("0"), 0, ord("5"), ord("7")
GNU_LONGNAME, GNU_LONGLINK, GNU_SPARSE = ord("L"), ord("K"), ord("S")
PAX_HEADER, PAX_GLOBAL = ord("x"), ord("g")
#: Members whose data is yielded.
REGULAR_TYPES = frozenset((REGTYPE, AREGTYPE, CONTTYPE))
#: Hard and symbolic links, devices, directories, fifos: POSIX says no data blocks follow them.
NO_DATA_TYPES = frozenset(b"123456")

_OCTAL = b"01234567"
_HIGH_BYTES = bytes(range(0x80, 0x100))
_USTAR_MAGIC = b"ustar\x00"  # POSIX; the GNU magic is b"ustar  \x00"


class Header(NamedTuple):
    """The fields of one header block that the reader needs.

    ``name`` is the raw name (ustar prefix joined), undecoded; ``typeflag`` is a byte value
    (``ord("0")`` for a regular file). A v7 regular file whose name ends in ``/`` is reported as a
    directory, as every tar implementation reads it.
    """

    name: bytes
    size: int
    typeflag: int


def checksum(block: bytes | bytearray | memoryview) -> int:
    """The tar checksum of a 512-byte header: the unsigned sum of its bytes, the checksum field counted as spaces.

    >>> checksum(bytes(BLOCKSIZE))  # eight spaces
    256
    """
    if len(block) != BLOCKSIZE:
        raise ConfigError(f"a tar header is {BLOCKSIZE} bytes, got {len(block)}")
    # zlib.adler32 started at 0 keeps the byte sum modulo 65521 in its low 16 bits; each slice is short
    # enough (<= 256 bytes of at most 255) for the sum to stay below the modulus: an exact sum, in C.
    adler = zlib.adler32
    return (
        (adler(block[0:148], 0) & 0xFFFF)
        + (adler(block[156:412], 0) & 0xFFFF)
        + (adler(block[412:512], 0) & 0xFFFF)
        + 256
    )


def _signed_checksum(block: bytes, unsigned: int) -> int:
    """The checksum some old tars wrote, summing the bytes as signed chars."""
    outside = block[:148] + block[156:]
    return unsigned - 256 * (len(outside) - len(outside.translate(None, _HIGH_BYTES)))


def parse_number(field: bytes, what: str = "numeric", *, url: str | None = None, offset: int | None = None) -> int:
    """Parse a numeric header field: octal text ended by NUL or space, or GNU base-256 (high bit set).

    An all-NUL or all-space field is 0, as in GNU tar and Python's ``tarfile``. Anything else that is not
    octal raises :class:`~shardstream.errors.TarFormatError`.

    >>> parse_number(b"0000644 \\0"), parse_number(b"\\x80" + bytes(10) + b"\\x01"), parse_number(b"\\0" * 8)
    (420, 1, 0)
    """
    first = field[0] if field else 0
    if first & 0x80:  # base-256, two's complement; bit 6 of the first byte is the sign
        raw = int.from_bytes(field, "big")
        bits = 8 * len(field)
        return raw - (1 << bits) if first & 0x40 else raw - (1 << (bits - 1))
    end = field.find(0)
    digits = (field if end < 0 else field[:end]).strip(b" ")
    if digits.translate(None, _OCTAL):
        raise TarFormatError(f"garbage in the {what} field of a tar header: {bytes(field)!r}", url=url, offset=offset)
    return int(digits, 8) if digits else 0


def parse_header(block: bytes, *, url: str | None = None, offset: int | None = None) -> Header:
    """Verify the checksum of one non-zero 512-byte header block and parse it.

    The checksum may be the unsigned or the signed byte sum (as GNU tar accepts). A bad checksum, a
    garbage numeric field, or a size that is negative or beyond :data:`MAX_MEMBER_SIZE` raises
    :class:`~shardstream.errors.TarFormatError` naming ``url`` and ``offset``.
    """
    stored = parse_number(block[148:156], "checksum", url=url, offset=offset)
    actual = checksum(block)
    if stored != actual and stored != _signed_checksum(block, actual):
        raise TarFormatError(
            f"bad tar header checksum (stored {stored}, computed {actual})", url=url, offset=offset
        )
    size = parse_number(block[124:136], "size", url=url, offset=offset)
    if not 0 <= size <= MAX_MEMBER_SIZE:
        raise TarFormatError(f"impossible member size {size} in a tar header", url=url, offset=offset)
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:263] == _USTAR_MAGIC:
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    typeflag = block[156]
    if typeflag == AREGTYPE and name.endswith(b"/"):
        typeflag = DIRTYPE
    return Header(name, size, typeflag)


def parse_pax_records(data: bytes, *, url: str | None = None, offset: int | None = None) -> dict[str, bytes]:
    """Parse the records ``"LEN key=value\\n"`` of a PAX extended header (``x`` or ``g``) into a dict.

    Values stay bytes (``hdrcharset=BINARY`` allows any bytes); an empty value means "unset" to the
    caller. NUL padding after the last record is ignored. A record whose length is not a decimal number,
    runs past the end, or lacks ``=`` or the final newline raises :class:`~shardstream.errors.TarFormatError`.

    >>> parse_pax_records(b"16 path=a/b.txt\\n11 size=42\\n")
    {'path': b'a/b.txt', 'size': b'42'}
    """
    records: dict[str, bytes] = {}
    pos, end = 0, len(data)
    while pos < end and data[pos] != 0:
        space = data.find(b" ", pos, pos + 21)
        length_text = data[pos:space]
        if space < 0 or not length_text.isdigit():
            raise TarFormatError(f"bad length in PAX record {data[pos:pos + 32]!r}", url=url, offset=offset)
        stop = pos + int(length_text)
        equals = data.find(b"=", space + 1, stop)
        if stop > end or equals <= space + 1 or data[stop - 1] != 0x0A:
            raise TarFormatError(f"bad PAX record {data[pos:min(stop, pos + 64)]!r}", url=url, offset=offset)
        key = data[space + 1 : equals].decode("utf-8", "surrogateescape")
        records[key] = data[equals + 1 : stop - 1]
        pos = stop
    return records


# -- the first block: a tar header, or another kind of file --------------------------------------------------------

_CHECK_URL = ("a shard must be a tar archive (.tar, or compressed: .tar.gz, .tar.zst...): check the URL, or write "
              "shards with ShardWriter or `shardstream create`")
_CONVERT = "convert it into shards first (`shardstream convert`, or shardstream.convert)"
_SERVER = "the server answered with a page instead of the shard: check the URL, and the credentials if it needs any"
#: first bytes -> (what the file is, what to do); checked in order
_MAGIC: tuple[tuple[bytes, str, str], ...] = (
    (b"\xff\xd8\xff", "a JPEG image", _CHECK_URL),
    (b"\x89PNG\r\n\x1a\n", "a PNG image", _CHECK_URL),
    (b"GIF8", "a GIF image", _CHECK_URL),
    (b"%PDF-", "a PDF document", _CHECK_URL),
    (b"\x93NUMPY", "a NumPy .npy file", _CHECK_URL),
    (b"\x1f\x8b", "gzip-compressed data", "decompress it, or read it with a reader that decompresses (WebDataset, "
                                          "iter_tar)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data", "decompress it, or read it with a reader that decompresses "
                                                 "(WebDataset, iter_tar)"),
    (b"\xfd7zXZ\x00", "xz-compressed data", "decompress it, or read it with a reader that decompresses (WebDataset, "
                                          "iter_tar)"),
    (b"PK\x03\x04", "a zip archive", "unpack it and convert the folder into shards (`shardstream convert`)"),
    (b"PK\x05\x06", "a zip archive", "unpack it and convert the folder into shards (`shardstream convert`)"),
    (b"PAR1", "a Parquet file", _CONVERT),
    (b"ARROW1", "an Arrow file", _CONVERT),
)


def not_a_tar(head: bytes, *, url: str | None = None, whole: bool = True) -> NotATarError | None:
    """The error for a stream that starts with ``head`` when that is not a tar header, or None when ``head`` may
    be a (damaged) tar: what the bytes look like (JPEG, PNG, gzip, zip, Parquet, an HTML error page, JSON, text...)
    and what to do. ``whole`` is False when ``head`` is all the stream holds and shorter than a block (a text
    that short may be a cut header's member name, so it is not called text). An empty ``head`` is an empty stream.

    >>> print(not_a_tar(b"\\xff\\xd8\\xff\\xe0" + bytes(508), url="cat.tar"))  # doctest: +ELLIPSIS
    not a tar file: it starts like a JPEG image (shard 'cat.tar'); a shard must be a tar archive ...
    >>> not_a_tar(b"<!DOCTYPE html><title>403 Forbidden</title>", whole=False).looks_like
    'it starts like an HTML page'
    >>> not_a_tar(bytes(148) + b"garbage" + bytes(357)) is None  # an unknown kind: a damaged tar, perhaps
    True
    """
    if not head:
        return NotATarError("it is an empty stream (0 bytes)", _CHECK_URL, url=url)
    if head[257:262] == b"ustar":  # a tar header, damaged
        return None
    for magic, what, fix in _MAGIC:
        if head.startswith(magic):
            return NotATarError(f"it starts like {what}", fix, url=url)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:256].lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return NotATarError("it starts like an HTML page", _SERVER, url=url)
    if text.startswith(b"<?xml"):
        what = "an XML document (an object store's error answer?)" if b"<error" in text else "an XML document"
        return NotATarError(f"it starts like {what}", _SERVER if b"<error" in text else _CHECK_URL, url=url)
    if text.startswith((b"{", b"[")) and _is_text(head):
        return NotATarError("it starts like JSON", _CONVERT + " (JSON lines: .jsonl)", url=url)
    if whole and _is_text(head):
        return NotATarError("it starts like text (CSV? JSON lines?)", _CONVERT, url=url)
    return None


def _is_text(head: bytes) -> bool:
    """Whether ``head`` reads as UTF-8 text (a character cut at the end allowed) without control characters."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:
            return False
        text = head[: e.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\r\n" for c in text)

