"""Local openers: paths, ``file:`` URLs and ``-`` (standard input).

>>> import pathlib
>>> _ = pathlib.Path("a.bin").write_bytes(b"data")
>>> path_of("file:a.bin"), path_of("file:///tmp/x%20y.tar"), path_of("a.bin")
('a.bin', '/tmp/x y.tar', 'a.bin')
>>> with open_path("file:a.bin") as f: f.read()
b'data'
"""

from __future__ import annotations

import io
import sys
from typing import IO

from ..config import get_settings
from ..errors import OpenError
from .urls import local_path

__all__ = ["open_path", "open_stdin", "path_of"]


def path_of(url: str) -> str:
    """The filesystem path a local URL names: ``file:///abs``, ``file:rel`` or a plain path (the rule is
    :func:`shardstream.io.urls.local_path`)."""
    path = local_path(url)
    return url if path is None else path


def open_path(url: str) -> IO[bytes]:
    """Open a local file (a path or a ``file:`` URL) for reading; a failure is an OpenError naming the URL."""
    path = path_of(url)
    try:
        return open(path, "rb", buffering=get_settings().bufsize)
    except OSError as e:
        raise OpenError(f"cannot open shard {url!r}: {e.strerror or e}", url=url) from e


class _StdinStream(io.RawIOBase):
    """Standard input as a binary stream whose ``close()`` leaves the process's stdin open."""

    def __init__(self) -> None:
        self._buffer = sys.stdin.buffer

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._buffer.read(len(b))
        b[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        return self._buffer.read(size)


def open_stdin(url: str = "-") -> IO[bytes]:
    """``-``: read the shard from standard input (closing the stream does not close stdin)."""
    return _StdinStream()  # type: ignore[return-value]
