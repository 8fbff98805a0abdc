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

from typing import IO

from ..errors import ConfigError
from .registry import (
    finish_stream,
    get_opener,
    known_schemes,
    open_url,
    register_opener,
    unregister_opener,
)
from .urls import expand_urls, local_path, split_scheme

__all__ = [
    "expand_urls",
    "finish_stream",
    "get_opener",
    "gopen",
    "known_schemes",
    "local_path",
    "open_url",
    "register_opener",
    "split_scheme",
    "unregister_opener",
]


def gopen(url: str, mode: str = "rb", bufsize: int | None = None, **kw: object) -> IO[bytes]:
    """webdataset's ``gopen``: open ``url`` for reading (``mode="rb"``; writing shards is ShardWriter's job)."""
    if mode != "rb":
        raise ConfigError(f"gopen({url!r}, mode={mode!r}): only 'rb' is supported; write shards with TarWriter")
    return open_url(url)
