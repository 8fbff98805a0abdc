"""Fixtures for the tar reader tests: both walks (pure Python and C), archive builders, a reference reader.

Every reader test takes the ``read`` (or ``members``) fixture, parametrized over the two walks. On the C walk,
it also runs the pure-Python walk on the same bytes and asserts the outcome is identical (members, error,
warnings). On archives given as bytes, it also reads them in place (``iter_members_mapped``, the zero-copy walk,
with the same walk) and from a plain file, both read by offset (``FileBuffer``) and through memory-mapped windows
(``WindowBuffer``), and asserts the same outcome, data compared as bytes. The builders are reached through the session fixture ``kit`` (usable in hypothesis tests).
"""

from __future__ import annotations

import dataclasses
import atexit
import io
import os
import shutil
import tarfile
import tempfile
import types
import warnings
from collections.abc import Callable, Iterable

import pytest

from shardstream import _native
from shardstream.errors import TarFormatError
from shardstream.tar import buffers, reader
from shardstream.tar.reader import (
    TruncatedTarWarning,
    iter_members,
    iter_members_mapped,
)
from shardstream.testing import ShortReads

WALKS = [
    pytest.param(False, id="python"),
    pytest.param(
        True, id="c", marks=pytest.mark.skipif(_native.extension is None, reason="C extension not built (setup.py build_ext)")
    ),
]


@dataclasses.dataclass
class Outcome:
    """What one pass over a tar stream gave: the members, then an error or warnings (compared as text)."""

    members: list[tuple[str, bytes, int]]
    error: TarFormatError | None
    warnings: list[str]

    def key(self) -> tuple:
        error = None if self.error is None else (str(self.error), self.error.offset, self.error.member)
        return self.members, error, self.warnings



def run(
    data: bytes | Callable[[], io.RawIOBase], *, accelerate: bool, url: str = "test.tar", bufsize: int = 1 << 20
) -> Outcome:
    """Read ``data`` (bytes, or a factory of streams) to the end, recording members, error and warnings."""
    stream = io.BytesIO(data) if isinstance(data, bytes) else data()
    members: list[tuple[str, bytes, int]] = []
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            members.extend(iter_members(stream, url, bufsize=bufsize, accelerate=accelerate))  # type: ignore[arg-type]
        except TarFormatError as e:
            error = e
    texts = [str(w.message) for w in caught if issubclass(w.category, TruncatedTarWarning)]
    assert len(texts) == len(caught), [str(w.message) for w in caught]
    return Outcome(members, error, texts)


def run_file(
    data: bytes, *, accelerate: bool, url: str = "test.tar", bufsize: int = 1 << 20, mapped: bool = False
) -> Outcome:
    """``run`` from a plain file holding ``data``: read by offset into a reused buffer (``FileBuffer``), or with
    ``mapped`` through memory-mapped windows (``WindowBuffer``)."""
    fd = _scratch_file()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    before, buffers.MAP_WINDOWS = buffers.MAP_WINDOWS, mapped
    try:
        with os.fdopen(os.dup(fd), "rb") as f:
            f.seek(0)
            if data and buffers._HAVE_PREADV:
                kind = type(buffers.source_for(f, bufsize))
                assert kind is (buffers.WindowBuffer if mapped and buffers.map_windows() else buffers.FileBuffer)
            return run(lambda: f, accelerate=accelerate, url=url, bufsize=bufsize)  # type: ignore[arg-type,return-value]
    finally:
        buffers.MAP_WINDOWS = before


_FOLDERS: list[str] = []
_FILES: list[int] = []


def _scratch_file() -> int:
    """One scratch file for this test process, open once: opening a file by its name at every read (thousands
    per truncation test) cost more than reading it."""
    if not _FILES:
        _FILES.append(os.open(os.path.join(_folder(), "archive.tar"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600))
    return _FILES[0]


def _folder() -> str:
    """One scratch folder for this test process (removed at exit): a folder per read made the tests slow."""
    if not _FOLDERS:
        _FOLDERS.append(tempfile.mkdtemp(prefix="shardstream-tar-tests-"))
        atexit.register(shutil.rmtree, _FOLDERS[0], True)
    return _FOLDERS[0]


def run_mapped(data: bytes, *, accelerate: bool, url: str = "test.tar", **_: object) -> Outcome:
    """``run`` through the zero-copy walk over ``data`` in memory: every member's data must be a memoryview."""
    members: list[tuple[str, bytes, int]] = []
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for name, view, offset in iter_members_mapped(data, url, accelerate=accelerate):
                assert isinstance(view, memoryview) and view.readonly
                members.append((name, bytes(view), offset))
        except TarFormatError as e:
            error = e
    texts = [str(w.message) for w in caught if issubclass(w.category, TruncatedTarWarning)]
    assert len(texts) == len(caught), [str(w.message) for w in caught]
    return Outcome(members, error, texts)


@pytest.fixture(params=WALKS)
def accelerate(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Which walk a test uses; also sets the module default, so code calling iter_tar() follows it."""
    monkeypatch.setattr(reader, "USE_ACCELERATOR", request.param)
    return request.param


@pytest.fixture
def read(accelerate: bool) -> Callable[..., Outcome]:
    """``read(data, url=..., bufsize=...) -> Outcome`` on the selected walk (checked against Python on C)."""

    def read_both(data: bytes | Callable[[], io.RawIOBase], **kw) -> Outcome:
        got = run(data, accelerate=accelerate, **kw)
        if accelerate:
            assert got.key() == run(data, accelerate=False, **kw).key(), "the C and Python walks disagree"
        if isinstance(data, bytes):
            assert got.key() == run_mapped(data, accelerate=accelerate, **kw).key(), "the zero-copy walk disagrees"
            assert got.key() == run_file(data, accelerate=accelerate, **kw).key(), "reading from a file disagrees"
            assert got.key() == run_file(data, accelerate=accelerate, mapped=True, **kw).key(), "mapped windows disagree"
        return got

    return read_both


@pytest.fixture
def members(read: Callable[..., Outcome]) -> Callable[..., list[tuple[str, bytes, int]]]:
    """``members(data, **kw)``: the members of a valid archive (asserting no error and no warning)."""

    def ok(data: bytes | Callable[[], io.RawIOBase], **kw) -> list[tuple[str, bytes, int]]:
        got = read(data, **kw)
        assert got.error is None, got.error
        assert not got.warnings, got.warnings
        return got.members

    return ok


def reference(data: bytes) -> list[tuple[str, bytes, int]]:
    """The regular members as Python's tarfile reads them: (name, data, offset_data)."""
    with tarfile.open(fileobj=io.BytesIO(data), encoding="utf-8", errors="surrogateescape") as tf:
        return [(m.name, tf.extractfile(m).read(), m.offset_data) for m in tf if m.isreg()]  # type: ignore[union-attr]


def make_tar(entries: Iterable[tarfile.TarInfo | tuple[str, bytes]], fmt: int = tarfile.USTAR_FORMAT, **kw) -> bytes:
    """An archive written by tarfile; entries are TarInfo (no data) or (name, data) regular files."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt, encoding="utf-8", errors="surrogateescape", **kw) as tf:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tf.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tf.addfile(info, io.BytesIO(entry[1]))
    return out.getvalue()


def special(name: str, kind: bytes, **attrs) -> tarfile.TarInfo:
    """A TarInfo of a non-regular type (tarfile.DIRTYPE, SYMTYPE, ...)."""
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def block_checksum(block: bytes | bytearray) -> int:
    """Independent of header.checksum: the unsigned byte sum with the checksum field as spaces."""
    return sum(block[:148]) + 8 * 32 + sum(block[156:512])


def raw_header(
    name: bytes,
    size: int | bytes,
    typeflag: bytes = b"0",
    *,
    magic: bytes = b"ustar\x0000",
    prefix: bytes = b"",
    chksum: bytes | None = None,
) -> bytes:
    """A hand-made header block; ``size`` as an int is written in octal, as bytes verbatim (12 bytes)."""
    block = bytearray(512)
    block[0 : len(name)] = name
    block[100:108] = b"0000644\0"
    block[108:116] = block[116:124] = b"0000000\0"
    block[124:136] = b"%011o\0" % size if isinstance(size, int) else size
    block[136:148] = b"00000000000\0"
    block[156:157] = typeflag
    block[257:265] = magic
    block[345 : 345 + len(prefix)] = prefix
    block[148:156] = chksum if chksum is not None else b"%06o\0 " % block_checksum(block)
    return bytes(block)


def pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def entry(name: bytes, data: bytes, typeflag: bytes = b"0", **kw) -> bytes:
    """A hand-made member: header, data, padding."""
    return raw_header(name, len(data), typeflag, **kw) + pad(data)


def pax_record(key: bytes, value: bytes) -> bytes:
    """One PAX record ``"LEN key=value\\n"``, LEN counting itself."""
    body = b" " + key + b"=" + value + b"\n"
    length = len(body) + 1
    while len(b"%d" % length) + len(body) != length:
        length += 1
    return b"%d" % length + body


def pax(*records: tuple[bytes, bytes], typeflag: bytes = b"x") -> bytes:
    """A PAX extended header (``x``, or ``g`` for global) with its padded records."""
    body = b"".join(pax_record(k, v) for k, v in records)
    return raw_header(b"PaxHeader", len(body), typeflag) + pad(body)


END = bytes(1024)


@pytest.fixture(scope="session")
def kit() -> types.SimpleNamespace:
    """The helpers above: ``kit.make_tar(...)``, ``kit.entry(...)``, ``kit.run(...)``..."""
    return types.SimpleNamespace(
        END=END,
        ShortReads=ShortReads,
        block_checksum=block_checksum,
        entry=entry,
        make_tar=make_tar,
        pad=pad,
        pax=pax,
        pax_record=pax_record,
        raw_header=raw_header,
        reference=reference,
        run=run,
        special=special,
        walks=[False] + ([True] if _native.extension is not None else []),
    )
