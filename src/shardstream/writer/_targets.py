"""What a writer writes to: compression by name, byte counting, temporary files (internal)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import warnings
from typing import IO, Any, Protocol, Union, cast

from ..errors import ConfigError, MissingDependencyError


class Writable(Protocol):
    """What a writer can write to besides a path: any object with ``write(bytes)`` (a file, a socket file, a
    counting sink)."""

    def write(self, data: bytes, /) -> int: ...


PathOrFile = Union[str, "os.PathLike[str]", Writable]
_BYTES = (bytes, bytearray, memoryview)
# Compression inferred from a path's ending (only when ``compress`` is None).
_SUFFIXES = {
    ".gz": "gz", ".tgz": "gz", ".bz2": "bz2", ".tbz": "bz2", ".tbz2": "bz2",
    ".xz": "xz", ".txz": "xz", ".zst": "zst", ".zstd": "zst", ".tzst": "zst",
}  # fmt: skip
_COMPRESSIONS = {"gz": "gz", "gzip": "gz", "bz2": "bz2", "xz": "xz", "zst": "zst", "zstd": "zst"}
#: Room left for what closing a compressed shard adds (compressed end-of-archive zeros, stream trailer).
_END_MARGIN = 512
#: Default levels: gzip 6 (zlib's default: nearly the size of level 9, several times faster), bz2 9, xz 6, zstd 3.
_LEVELS = {"gz": 6, "bz2": 9, "xz": 6, "zst": 3}


def _compression(compress: bool | str | None, path: str | None) -> str | None:
    """Normalize ``compress`` (None infers from the path's ending, like webdataset infers ``.gz``)."""
    if compress is None:
        if path is None:
            return None
        lowered = path.lower()
        return next((kind for suffix, kind in _SUFFIXES.items() if lowered.endswith(suffix)), None)
    if compress is False or compress == "":
        return None
    if compress is True:
        return "gz"
    kind = _COMPRESSIONS.get(compress.lower()) if isinstance(compress, str) else None
    if kind is None:
        raise ConfigError(f"compress={compress!r} is not one of None, False, True, 'gz', 'bz2', 'xz', 'zst'")
    return kind


class _Counter:
    """Counts the bytes a compressor writes to the underlying stream (and completes partial raw writes)."""

    def __init__(self, fileobj: Any):
        self.fileobj, self.count = fileobj, 0
        self.discarded = False  # set by an abort: what the compressor writes later (at garbage collection) is dropped

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        if self.discarded:
            return total
        while view:
            written = self.fileobj.write(view)
            if written is None:
                break
            view = view[written:]
        self.count += total
        return total

    def flush(self) -> None:
        flush = getattr(self.fileobj, "flush", None)
        if flush is not None:
            flush()


def _compressor(kind: str, sink: _Counter, level: int | None) -> Any:
    level = _LEVELS[kind] if level is None else level
    if kind == "gz":  # mtime 0 and no file name: the gzip header is the same on every run
        return gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=level, mtime=0)
    if kind == "bz2":
        return bz2.BZ2File(sink, "wb", compresslevel=level)
    file = cast(IO[bytes], sink)  # a _Counter has the write() and flush() the compressors call; typing.IO is nominal
    if kind == "xz":
        return lzma.LZMAFile(file, "wb", preset=level)
    try:
        import zstandard  # noqa: PLC0415 - optional: shardstream[zstd]
    except ImportError:
        raise MissingDependencyError("writing .tar.zst", "zstd", "zstandard") from None
    return zstandard.ZstdCompressor(level=level).stream_writer(file, closefd=False)


def _open_file(fd: int) -> Any:
    """The file a path TarWriter writes to: unbuffered, since TarStreamWriter buffers (no second copy)."""
    return os.fdopen(fd, "wb", buffering=0)


def _publish(raw: Any, tmp: str, path: str, fsync: bool) -> None:
    """Close the temporary file ``tmp`` and rename it to ``path``. With ``fsync`` its data reaches the disk before
    the rename, and the rename (the directory) before this returns: after a power loss ``path`` is either the
    complete shard or absent (or the previous file), never a short one."""
    if fsync:
        try:
            fd = raw.fileno()
        except (AttributeError, io.UnsupportedOperation):  # a wrapper without a descriptor: nothing to sync
            fd = None
        if fd is not None:
            os.fsync(fd)
    raw.close()
    os.replace(tmp, path)
    if fsync:
        _fsync_directory(os.path.dirname(path) or ".")


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - platforms where directories cannot be opened (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems that refuse fsync on a directory
        pass
    finally:
        os.close(fd)


def _cleanup(raw: Any, tmp: str) -> None:
    """Finalizer of a path TarWriter that was never closed: drop its temporary file."""
    try:
        raw.close()
    except OSError:
        pass
    try:
        os.unlink(tmp)
    except OSError:
        pass
    warnings.warn(f"TarWriter for {tmp!r} was never closed; its temporary file was removed", ResourceWarning, 2)
