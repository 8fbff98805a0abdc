"""webdataset's ``cache`` module: downloading shards to a local directory, over shardstream's shard cache
(:class:`shardstream.io.cache.ShardCache`: one download per shard across processes, size checks, LRU eviction
that never removes a shard being read).

>>> url_to_cache_name("https://example.com/data/train-000.tar"), url_to_cache_name("s3://b/x/y.tar", ndir=1)
('train-000.tar', 'x/y.tar')
>>> import pathlib
>>> _ = pathlib.Path("shard.tar").write_bytes(bytes(1024))
>>> FileCache("cache_dir").get_file("shard.tar")  # local files are read in place
'shard.tar'
>>> [s["url"] for s in StreamingOpen()(["shard.tar"])]
['shard.tar']
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .config import get_settings
from .io import open_url, split_scheme
from .io.cache import ShardCache
from .io.local import path_of
from .pipeline import reraise_exception, url_opener
from .redact import redact, redacting_logger
from .tar.compress import compression
from .utils import obsolete

__all__ = [
    "FileCache", "LRUCleanup", "StreamingOpen", "check_tar_format", "default_cache_dir", "default_cache_size",
    "download", "get_filetype", "islocal", "magic_filetype", "obsolete", "pipe_cleaner", "reraise_exception",
    "url_to_cache_name", "verbose_cache",
]

_settings = get_settings()
#: webdataset's defaults, from ``SHARDSTREAM_CACHE_DIR`` / ``WDS_CACHE`` and the size variables
default_cache_dir: str = _settings.cache_dir or "./_cache"
default_cache_size: float = float(_settings.cache_size) if _settings.cache_size is not None else 1e18
verbose_cache: int = int(_settings.verbose)
_NAMED_SCHEMES = ("", "file", "http", "https", "ftp", "ftps", "gs", "s3", "ais")


def islocal(url: str) -> bool:
    """Whether ``url`` is a local path or ``file:`` URL."""
    return split_scheme(url)[0] in ("", "file")


def magic_filetype(fname: str) -> str:
    """``"NAME: POSIX tar archive"``, ``"NAME: gzip compressed data"`` (bz2, xz, zstd alike) or ``"NAME: data"``,
    from the first bytes of the file."""
    with open(fname, "rb") as f:
        head = f.read(512)
    kind = compression(head[:10])
    if kind is not None:
        return f"{fname}: {kind} compressed data"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return f"{fname}: POSIX tar archive"
    return f"{fname}: data"


#: webdataset runs the ``file`` command here; shardstream reads the magic bytes itself
get_filetype = magic_filetype


def check_tar_format(fname: str) -> bool:
    """Whether ``fname`` looks like a (possibly compressed) tar archive."""
    kind = magic_filetype(fname)
    return "tar archive" in kind or "compressed data" in kind


@obsolete
def pipe_cleaner(spec: str) -> str:
    """The URL inside a ``pipe:`` command (``pipe:curl -s https://...`` -> ``https://...``); other specs as is."""
    if spec.startswith("pipe:"):
        for word in spec[5:].split(" "):
            if re.match(r"^(https?|hdfs|gs|ais|s3):", word):
                return word
    return spec


def url_to_cache_name(url: str, ndir: int = 0) -> str:
    """The cache name of ``url``: its last ``ndir + 1`` path components for the usual schemes, else the whole URL
    quoted (at most 128 characters)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in _NAMED_SCHEMES:
        return "/".join(parsed.path.lstrip("/").split("/")[-1 - ndir :])
    return urllib.parse.quote(redact(url), safe="_+{}*,-")[-128:]  # never a secret in a file name


class LRUCleanup:
    """Keep a cache directory under ``cache_size`` bytes by removing the least recently used files (shards being
    read are skipped). ``cleanup()`` runs at most every ``interval`` seconds (None: every call).

    ``keyfn`` is accepted for webdataset compatibility; the order is always least recently used first.
    """

    def __init__(self, cache_dir: str | None = None, cache_size: int = int(1e12),
                 keyfn: Callable[[str], float] = os.path.getctime, verbose: bool = False, interval: int | None = 30):
        self.cache_dir, self.cache_size, self.keyfn = cache_dir, cache_size, keyfn
        self.verbose, self.interval, self.last_run = verbose, interval, 0.0

    def set_cache_dir(self, cache_dir: str) -> None:
        """Set the directory to clean."""
        self.cache_dir = cache_dir

    def cleanup(self) -> None:
        """Remove least recently used files until the directory is under the size limit."""
        import time  # noqa: PLC0415 - stdlib, used on this path only

        if self.cache_dir is None or not os.path.isdir(self.cache_dir):
            return
        if self.interval is not None and time.time() - self.last_run < self.interval:
            return
        ShardCache(self.cache_dir, int(self.cache_size), verbose=self.verbose).evict()
        self.last_run = time.time()


def download(url: str, dest: str, chunk_size: int = 1024**2, verbose: bool = False) -> None:
    """Copy ``url`` to the local file ``dest`` (written under a temporary name, then renamed)."""
    temp = f"{dest}.{os.getpid()}.temp"
    try:
        with open_url(url) as stream, open(temp, "wb") as out:
            while chunk := stream.read(chunk_size):
                out.write(chunk)
        os.replace(temp, dest)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    if verbose:
        redacting_logger(__name__).info("downloaded %s to %s", url, dest)


class StreamingOpen:
    """Open each URL of an iterator of URLs (or ``{"url": ...}`` dicts): yields ``{"url": url, "stream": s}``."""

    def __init__(self, verbose: bool = False, handler: Callable[[BaseException], bool] = reraise_exception):
        self.verbose, self.handler = verbose, handler

    def __call__(self, urls: Iterable[str | dict[str, Any]]) -> Iterator[dict[str, Any]]:
        return url_opener(({"url": u} if isinstance(u, str) else u for u in urls), handler=self.handler)


class FileCache:
    """Download each URL once into ``cache_dir`` and yield ``{"url", "stream", "local_path"}`` for it.

    Downloads go through :class:`~shardstream.io.cache.ShardCache` (locking, size checks, eviction beyond
    ``cache_size`` bytes; -1: no limit); ``url_to_name`` names the cached files; ``validator`` checks a new
    file (a ValueError if it fails).
    """

    def __init__(self, cache_dir: str | None = None, *, url_to_name: Callable[[str], str] = url_to_cache_name,
                 verbose: bool = False, validator: Callable[[str], bool] = check_tar_format,
                 handler: Callable[[BaseException], bool] = reraise_exception, cache_size: int = -1,
                 cache_cleanup_interval: int = 30):
        self.cache_dir = cache_dir or default_cache_dir
        self.url_to_name, self.validator, self.handler, self.verbose = url_to_name, validator, handler, verbose
        self.cleaner = LRUCleanup(self.cache_dir, cache_size, verbose=verbose, interval=cache_cleanup_interval) \
            if cache_size > 0 else None
        self._cache = ShardCache(self.cache_dir, cache_size if cache_size > 0 else None, url_to_name=url_to_name,
                                 verbose=verbose)

    def get_file(self, url: str) -> str:
        """The local path of ``url``: the file itself when local, else its cached copy (downloaded if needed)."""
        if islocal(url):
            return path_of(url)
        path = self._cache.fetch(url)
        if self.validator is not None and not self.validator(path):
            os.unlink(path)
            raise ValueError(f"{url}: the downloaded file {path} is not valid (validator {self.validator.__name__})")
        return path

    def __call__(self, urls: Iterable[str | dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for item in urls:
            url = item["url"] if isinstance(item, dict) else item
            try:
                path = self.get_file(url)
                stream = open(path, "rb")
            except Exception as e:  # noqa: BLE001 - the handler decides
                if self.handler(e):
                    continue
                break
            yield {"url": url, "stream": stream, "local_path": path}
