"""Index a tar archive without reading its data: member offsets by a header-only walk; DALI's index format.

:func:`scan_members` walks the headers of an uncompressed tar (a file, memory-mapped, or any bytes-like
buffer) and returns ``(name, data_offset, size)`` tuples for the regular files, jumping over member data instead of
reading it. It makes exactly the decisions of the streaming reader (:func:`~shardstream.tar.iter_members`),
being the same walk (:func:`shardstream.tar.reader.walk` with ``data=False``): same members, same
:class:`~shardstream.errors.TarFormatError` messages, same :class:`~shardstream.tar.TruncatedTarWarning`. Runs of small members go through the optional C header walk
(``shardstream.tar._scan``) one window at a time; members larger than a window, extended headers and every
error go through the Python code.

:func:`format_dali_index` writes NVIDIA DALI's webdataset index format v1.2 (what DALI's ``tools/wds2idx.py``
writes and ``fn.readers.webdataset(index_paths=...)`` reads) from members already grouped into samples: a first
line ``v1.2 <samples>``, then one line per sample, ``<ext> <data_offset> <size> <member name>`` for each of its
members, separated by single spaces, each line ending with ``\\n``. Grouping members into samples (the key rule)
belongs to :mod:`shardstream.samples`, a floor above this one: see :func:`shardstream.indexed.write_dali_index`.

>>> import io
>>> from shardstream.tar.writer import TarStreamWriter
>>> out = io.BytesIO()
>>> with TarStreamWriter(out) as tw:
...     _ = tw.add("s0.cls", b"1"), tw.add("s0.txt", b"some text")
>>> members = scan_members(out.getvalue(), "s.tar")
>>> members
[('s0.cls', 512, 1), ('s0.txt', 1536, 9)]
>>> print(format_dali_index([[("cls", 512, 1, "s0.cls"), ("txt", 1536, 9, "s0.txt")]]), end="")
v1.2 1
cls 512 1 s0.cls txt 1536 9 s0.txt
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Sequence

from ..errors import ConfigError, SampleFormatError, TarFormatError
from . import reader
from .compress import compression

__all__ = ["DALI_VERSION", "IndexEntry", "format_dali_index", "scan_file", "scan_members"]

#: The version tag on the first line of DALI index files written here.
DALI_VERSION = "v1.2"
_STACK = 4  # warnings point at the caller of scan_members / scan_file
Buffer = bytes | bytearray | memoryview | mmap.mmap


#: One regular member: ``(name, data_offset, size)`` (a plain tuple: millions are made per second).
IndexEntry = tuple[str, int, int]


class _Mapped:
    """The walk's :class:`~shardstream.tar.reader.Source` over bytes that are all there (a map or a buffer).

    Slicing ``buf`` gives ``bytes`` (also for an ``mmap``), which the reader's helpers expect.
    """

    __slots__ = ("buf", "pos", "base", "eof")

    def __init__(self, buf: Buffer):
        self.buf, self.pos, self.base, self.eof = buf, 0, 0, True

    def fill(self, need: int) -> bool:
        return len(self.buf) - self.pos >= need

    def take_direct(self, start: int, size: int, padded: int) -> bytes | None:
        return None  # everything is in buf already


def scan_members(data: Buffer, url: str = "<buffer>", *, accelerate: bool | None = None) -> list[IndexEntry]:
    """The regular members of the uncompressed tar archive in ``data``, in archive order, without their data.

    Header-only: member data is never read (the C walk checks headers and jumps over data, as Python does).
    ``accelerate`` as in :func:`~shardstream.tar.iter_members`. A compressed archive raises
    :class:`~shardstream.errors.ConfigError` (offsets inside a compressed stream do not allow random access).

    >>> from shardstream.tar.writer import TarStreamWriter
    >>> import io
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     _ = tw.add("a/" + "x" * 120 + ".bin", bytes(1000))
    >>> [(len(name), offset, size) for name, offset, size in scan_members(out.getvalue())]
    [(126, 1536, 1000)]
    """
    if isinstance(data, memoryview):  # the reader's helpers need slices with bytes methods
        data = data.tobytes()
    return _scan_checked(data, url, accelerate)


def scan_file(
    path: str | os.PathLike[str], url: str | None = None, *, accelerate: bool | None = None
) -> list[IndexEntry]:
    """:func:`scan_members` of a local file, memory-mapped (only the pages holding headers are read).

    >>> from shardstream.tar.writer import TarStreamWriter
    >>> with open("one.tar", "wb") as f, TarStreamWriter(f) as tw:
    ...     _ = tw.add("k.txt", b"hi")
    >>> scan_file("one.tar")
    [('k.txt', 512, 2)]
    """
    url = os.fspath(path) if url is None else url
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise TarFormatError("empty stream: not a tar archive", url=url, offset=0)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return _scan_checked(mapped, url, accelerate)


def _scan_checked(data: Buffer, url: str, accelerate: bool | None) -> list[IndexEntry]:
    scan = reader.member_scan(accelerate)
    _refuse_compressed(bytes(data[:10]), url)
    return list(reader.walk(_Mapped(data), url, scan, data=False, stacklevel=_STACK))


def _refuse_compressed(head: bytes, url: str) -> None:
    kind = compression(head)
    if kind is not None:
        raise ConfigError(
            f"shard {url!r} is {kind}-compressed: a compressed tar cannot be read at random offsets, so it cannot "
            "be indexed; decompress it (e.g. `gunzip -k`, `zstd -d`) and index the plain .tar"
        )


def format_dali_index(samples: Iterable[Sequence[tuple[str, int, int, str]]], url: str | None = None) -> str:
    """DALI's index file (v1.2) for samples given as lists of ``(ext, data_offset, size, member_name)``.

    DALI's format separates fields with spaces, so a member name or extension containing whitespace cannot be
    written: it raises :class:`~shardstream.errors.SampleFormatError` naming ``url`` and the member. An empty list
    of samples gives ``"v1.2 0\\n"`` (DALI's own tool refuses empty archives).

    >>> print(format_dali_index([[("jpg", 512, 3000, "a/x.jpg"), ("cls", 4096, 1, "a/x.cls")]]), end="")
    v1.2 1
    jpg 512 3000 a/x.jpg cls 4096 1 a/x.cls
    """
    lines = []
    for sample in samples:
        parts = []
        for ext, offset, size, name in sample:
            if len(name.split()) != 1 or len(ext.split()) != 1:
                raise SampleFormatError(
                    "member name contains whitespace, which DALI's space-separated index format cannot represent",
                    url=url,
                    member=name,
                )
            parts.append(f"{ext} {offset} {size} {name}")
        lines.append(" ".join(parts) + "\n")
    return f"{DALI_VERSION} {len(lines)}\n" + "".join(lines)
