"""Opening shards by URL: a registry of openers by scheme (see :mod:`shardstream.io.registry`).

Local sources are built in: paths, ``file:`` URLs, ``-`` (stdin) and ``pipe:CMD`` (runs CMD in a shell: see
:mod:`shardstream.io.pipe`). Other schemes are registered with :func:`register_opener`. What a URL names
(its scheme, its local path, brace patterns) is decided in :mod:`shardstream.io.urls`.

>>> import pathlib
>>> _ = pathlib.Path("s.bin").write_bytes(b"12")
>>> with gopen("s.bin") as f: f.read()
b'12'
"""

from __future__ import annotations

import io
import os
from typing import IO, TYPE_CHECKING, Any

from .._lazy import lazy_module
from ..errors import ConfigError
from .local import path_of
from .registry import (
    finish_stream,
    get_opener,
    known_schemes,
    open_url,
    register_opener,
    unregister_opener,
)
from .trust import check_url
from .urls import expand_urls, local_path, split_scheme

if TYPE_CHECKING:
    from . import remote_write
else:
    remote_write = lazy_module("shardstream.io.remote_write")  # loads with the first remote write

__all__ = [
    "expand_urls",
    "finish_stream",
    "get_opener",
    "gopen",
    "known_schemes",
    "local_path",
    "open_for_writing",
    "open_url",
    "register_opener",
    "split_scheme",
    "unregister_opener",
]


def gopen(url: str | os.PathLike[str], mode: str = "rb", bufsize: int | None = None, **kw: Any) -> IO[bytes]:
    """webdataset's ``gopen``: open ``url`` for reading (``"rb"``) or writing (``"wb"``).

    Reading goes through :func:`open_url` (every registered scheme). Writing: a local path or ``file:`` URL
    (opened directly), ``-`` (standard output; closing it leaves stdout open), ``pipe:CMD`` (the data goes to
    ``CMD``'s standard input) and object-store URLs (``s3://``...; published when closed). ``bufsize`` and other
    webdataset options are accepted and ignored.

    >>> with gopen("g.bin", "wb") as f: _ = f.write(b"written")
    >>> with gopen("g.bin") as f: f.read()
    b'written'
    >>> with gopen("pipe:cat > p.bin", "wb") as f: _ = f.write(b"piped")
    >>> open("p.bin", "rb").read()
    b'piped'
    """
    url = os.fspath(url)
    if mode == "rb":
        return open_url(url)
    if mode != "wb":

        raise ConfigError(f"gopen({url!r}, mode={mode!r}): the modes are 'rb' and 'wb'")
    return open_for_writing(url)


def open_for_writing(url: str) -> IO[bytes]:
    """A binary stream that writes ``url``: a path, ``file:``, ``-`` (stdout), ``pipe:CMD`` or an object store.

    >>> with open_for_writing("file:w.bin") as f: _ = f.write(b"x")
    >>> open("w.bin", "rb").read()
    b'x'
    """

    check_url(url)
    if url == "-":
        import sys  # noqa: PLC0415 - stdlib, used on this path only

        return _Unclosed(sys.stdout.buffer)  # type: ignore[return-value]
    scheme, _ = split_scheme(url)
    if scheme in ("", "file"):

        return open(path_of(url), "wb")

    return remote_write.open_for_write(url)  # type: ignore[return-value]


class _Unclosed(io.RawIOBase):
    """A writable stream whose ``close()`` flushes but leaves the underlying stream (stdout) open."""

    def __init__(self, stream: IO[bytes]):
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._stream.write(data)

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        if not self.closed:
            self._stream.flush()
        super().close()
