"""The shard cache: remote shards downloaded once to a local directory, read from there afterwards.

:class:`ShardCache` is an opener (``cache(url) -> binary stream``) and a picklable value, so DataLoader
workers receive it with the dataset (``WebDataset(urls, cache_dir=..., cache_size=...)``). For a remote URL:

- the local name comes from the whole URL: a readable part and a hash of the URL
  (``http_host_data_train-000.1f2e3d4c5b6a7988.tar``), so ``a/shard-0.tar`` and ``b/shard-0.tar`` never collide;
- a shard is downloaded to a temporary name in the ``.partial`` subfolder, its size checked against the server's (and its MD5 where
  the server states one), then renamed into place: a name in the cache is always a complete shard. When the
  server states no size (no ``Content-Length``, a ``pipe:`` command), the download must be a complete tar
  archive (every member whole, the end-of-archive marker present, compressed data complete): a connection
  closed early, even between two members, is an OpenError naming the URL, and nothing is cached;
- processes that want the same shard (DataLoader workers, several ranks on one machine) download it once: one
  holds the shard's lock file (``fcntl.flock``) while it downloads, the others wait for it and then read the file.
  So a download never opens the next shard ahead (:mod:`shardstream.io.prefetch`): that stream would fetch the
  next shard outside its lock, once in every process that reads it;
- the lock file of a shard exists only while the shard is downloaded: the downloader removes it before letting
  go, and a process that waited on it checks, once it holds the lock, that the path still names the file it
  locked (else it locks the new one), so a folder of a million shards read once does not keep a million lock files;
- every reader holds a shared lock on the file it reads; eviction (least recently used first, when the cache
  exceeds ``max_bytes``) takes an exclusive lock without waiting and skips the files it cannot lock, so a shard
  being read is never removed;
- eviction reads the size and last use of the shards from an index in the folder
  (:mod:`shardstream.io.cache_index`), not from a listing of it: making room costs a few look-ups per download,
  whatever the number of shards cached. The index is checked before it is trusted, and rebuilt from a scan when it
  is missing or wrong, when the folder changed behind its back (a user deleting files), and at least every 256
  downloads (or as many as there are shards cached, if more);
- a cached shard is read without any network access: a cached dataset works offline.

How far the cache may exceed ``max_bytes``: room is made for a download of known size before it starts, and
again after it, so the cache exceeds ``max_bytes`` only by the shards being read (never removed: when they all
are, the cache cannot shrink below them), by the downloads of other processes in progress at that moment (until
their own eviction, right after they finish), and by a shard larger than the whole limit (kept while it is read).
Files put in the folder behind the cache's back are counted at the next eviction, as the folder's modification
time shows a change; in the rare case it does not (two changes within one tick of its clock), at the next scan.

Local shards (paths, ``file:``) are never copied. URL rewriting (:mod:`shardstream.io.rewrite`) applies to
what is downloaded; the cache name comes from the URL as written. Locks need POSIX ``fcntl``; elsewhere the
cache still works within one process.

>>> import pathlib
>>> cache = ShardCache("cache", max_bytes=10 << 20)
>>> cache.name_for("https://example.com/data/train-000.tar")
'https_example.com_data_train-000.892c2e3a4f383451.tar'
>>> _ = pathlib.Path("local.tar").write_bytes(b"x" * 10)
>>> with cache("local.tar") as f: f.read()  # local: read in place, not copied
b'xxxxxxxxxx'
>>> sorted(cache.entries())
[]
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import secrets
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from .._lazy import lazy_module
from ..config import get_settings
from ..errors import OpenError, TarFormatError
from ..logs import log_to_stderr
from ..redact import redact, redacting_logger
from ..tar import TruncatedTarWarning
from ..tar.compress import iter_tar
from .filelock import locked, removable_lock, remove_unless_locked, try_lock
from .registry import finish_stream, get_opener, split_scheme
from .rewrite import rewrite_url

if TYPE_CHECKING:
    import sqlite3

    from . import cache_index, prefetch
else:
    sqlite3 = lazy_module("sqlite3")
    cache_index = lazy_module("shardstream.io.cache_index")  # sqlite3 loads when a download is recorded
    prefetch = lazy_module("shardstream.io.prefetch")  # its threads and the HTTP client load with a download

__all__ = ["ShardCache", "cache_opener"]

logger = redacting_logger(__name__)

_LOCAL = ("", "file")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SUFFIX = re.compile(r"(?:\.[A-Za-z][A-Za-z0-9]{0,3}){1,2}$")  # .tar, .tar.gz, .tgz
_EVICT_LOCK = ".evict.lock"


@dataclasses.dataclass(frozen=True)
class ShardCache:
    """A directory of downloaded shards with a size limit (see the module docstring).

    :param directory: where the shards go (created on first use)
    :param max_bytes: size limit; least recently used shards not being read are removed beyond it (None: none)
    :param verify: check the MD5 a server states for a shard (``Content-MD5``, GCS ``md5Hash``)
    :param url_to_name: a function ``url -> file name`` to use instead of the built-in naming
    :param verbose: show the INFO lines it logs for every download and eviction on stderr (:mod:`shardstream.logs`)
    """

    directory: str
    max_bytes: int | None = None
    verify: bool = True
    url_to_name: Callable[[str], str] | None = None
    verbose: bool = False

    def __call__(self, url: str) -> IO[bytes]:
        return self.open(url)

    def name_for(self, url: str) -> str:
        """The file name of ``url`` in the cache: a readable part, 16 hex digits of its SHA-256, its suffix; both
        from the URL as shown (:func:`~shardstream.redact.redact`: no password, token or signature)."""
        if self.url_to_name is not None:
            return os.path.basename(self.url_to_name(url))
        shown = redact(url)  # a password, token or signature never becomes (or is hashed into) a file name
        digest = hashlib.sha256(shown.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        readable = _UNSAFE.sub("_", shown.replace("://", "_")).strip("._")
        suffix = _SUFFIX.search(readable)
        if suffix:
            readable = readable[: suffix.start()]
        return f"{readable[-120:].lstrip('._') or 'shard'}.{digest}{suffix.group(0) if suffix else ''}"

    def path_for(self, url: str) -> str:
        """Where ``url`` is (or would be) cached."""
        return os.path.join(self.directory, self.name_for(url))

    # -- reading ----------------------------------------------------------------------------------------------

    def open(self, url: str) -> IO[bytes]:
        """A stream of the shard: the cached file (downloaded first if needed), or a local file in place."""
        target = rewrite_url(url)
        if split_scheme(target)[0] in _LOCAL or target == "-":
            return get_opener(target)(target)
        path = self.path_for(url)
        for attempt in range(5):
            stream = self._open_cached(path)
            if stream is not None:
                if attempt:
                    self.evict()  # after taking the read lock: the new shard itself is safe
                else:
                    logger.debug("cache hit: %s is %s", url, path)
                return stream
            logger.debug("cache miss: %s is not in %s%s", url, self.directory,
                         f" (evicted meanwhile: try {attempt + 1})" if attempt else "")
            self._fetch(url, target, path)
        return get_opener(target)(target)  # pragma: no cover - evicted five times in a row: stream it

    def _open_cached(self, path: str) -> IO[bytes] | None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        try_lock(fd, shared=True)  # held until the stream is closed: eviction skips this file
        if os.fstat(fd).st_nlink == 0:  # evicted between open and lock
            os.close(fd)
            return None
        with contextlib.suppress(OSError):
            os.utime(fd if os.utime in os.supports_fd else path)  # least recently *used*
        return os.fdopen(fd, "rb", buffering=1 << 20)

    def fetch(self, url: str) -> str:
        """Make sure ``url`` is in the cache (downloading it once, whoever asks) and return its path."""
        path = self.path_for(url)
        self._fetch(url, rewrite_url(url), path)
        self.evict()
        return path

    def _fetch(self, url: str, target: str, path: str) -> None:
        locks = os.path.join(self.directory, ".locks")
        os.makedirs(locks, exist_ok=True)
        with removable_lock(os.path.join(locks, os.path.basename(path) + ".lock")):  # one download per shard
            if not os.path.exists(path):
                self._download(url, target, path)
            else:
                logger.debug("cache: %s was downloaded by another reader meanwhile", url)

    def _download(self, url: str, target: str, path: str) -> None:
        with prefetch.Lookahead() as alone:  # nothing opened ahead: a shard opened outside its lock would be downloaded twice
            stream = alone.open(get_opener(target), target, None)
        partial = os.path.join(self.directory, cache_index.PARTIAL)  # not in the folder itself: see cache_index
        os.makedirs(partial, exist_ok=True)
        tmp = os.path.join(partial, f"{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
        try:
            size, md5 = getattr(stream, "size", None), getattr(stream, "md5", None) if self.verify else None
            if size:
                self.evict(needed=size)
            digest = hashlib.md5(usedforsecurity=False) if md5 else None
            written = 0
            with open(tmp, "wb") as out:
                buf = bytearray(1 << 20)
                view = memoryview(buf)
                while True:
                    n = stream.readinto(view) if hasattr(stream, "readinto") else _read_into(stream, view)
                    if not n:
                        break
                    out.write(view[:n])
                    if digest is not None:
                        digest.update(view[:n])
                    written += n
                finish_stream(stream)
                out.flush()
                os.fsync(out.fileno())
            if size is not None and written != size:
                raise OpenError(f"{url!r}: downloaded {written} bytes, the server announced {size}", url=url)
            if size is None:
                _check_complete_tar(tmp, url, written)
            if digest is not None and digest.hexdigest() != md5:
                raise OpenError(f"{url!r}: MD5 {digest.hexdigest()} does not match the server's {md5}", url=url)
            self._put_in_place(tmp, path)
            self._say("cached %s -> %s (%d bytes)", url, path, written)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        finally:
            stream.close()

    # -- eviction -----------------------------------------------------------------------------------------------

    def entries(self) -> dict[str, tuple[int, float]]:
        """Cached shards: file name -> (size in bytes, last use time)."""
        found = {}
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.directory):
                if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(FileNotFoundError):
                        st = entry.stat(follow_symlinks=False)
                        found[entry.name] = (st.st_size, st.st_mtime)
        return found

    def evict(self, needed: int = 0) -> list[str]:
        """Remove least recently used shards not being read until the cache (plus ``needed`` bytes) fits in
        ``max_bytes``; when it scans the folder, also removes the temporary and lock files of dead downloads. Returns
        the names removed."""
        if self.max_bytes is None or self.max_bytes < 0 or not os.path.isdir(self.directory):
            return []
        with locked(os.path.join(self.directory, _EVICT_LOCK)):
            try:
                with cache_index.CacheIndex(self.directory) as index:
                    gone = index.evict(needed, self.max_bytes, remove_unless_locked)
                    if index.scanned:
                        self._remove_stale_locks()
            except (sqlite3.Error, OSError) as e:  # no usable index here (a read-only or odd file system)
                logger.warning("shard cache %s: no index (%s): the folder is listed instead", self.directory, e)
                gone = self._evict_by_listing(needed, self.max_bytes)
        for name, size in gone:
            self._say("evicted %s (%d bytes)", name, size)
        return [name for name, _ in gone]

    def _put_in_place(self, tmp: str, path: str) -> None:
        """Rename a checked download into place and record it, under the eviction lock (the index is opened first:
        it checks that the folder has not changed since it was last written)."""
        with locked(os.path.join(self.directory, _EVICT_LOCK)), contextlib.ExitStack() as stack:
            index = None
            try:
                index = stack.enter_context(cache_index.CacheIndex(self.directory))
            except (sqlite3.Error, OSError) as e:
                logger.warning("shard cache %s: no index (%s): the next scan counts %s", self.directory, e, path)
            os.replace(tmp, path)
            if index is not None:
                try:
                    st = os.stat(path)
                    index.add(os.path.basename(path), st.st_size, st.st_mtime_ns)
                except (sqlite3.Error, OSError) as e:  # the shard is in place: the next scan counts it
                    logger.warning("shard cache %s: %s not recorded in the index (%s)", self.directory, path, e)

    def _evict_by_listing(self, needed: int, max_bytes: int) -> list[tuple[str, int]]:
        entries = self.entries()
        total = sum(size for size, _ in entries.values()) + needed
        removed = []
        for name, (size, _) in sorted(entries.items(), key=lambda item: item[1][1]):
            if total <= max_bytes:
                break
            if remove_unless_locked(os.path.join(self.directory, name)):
                removed.append((name, size))
                total -= size
        return removed

    def _remove_stale_locks(self) -> None:
        """Remove the lock files of downloads that died (a download removes its own): each one nobody holds."""
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(os.path.join(self.directory, ".locks")):
                remove_unless_locked(entry.path)

    def _say(self, message: str, *args: Any) -> None:
        if self.verbose:
            log_to_stderr()
        logger.info(message, *args)


def _check_complete_tar(path: str, url: str, written: int) -> None:
    """Raise OpenError unless ``path`` is a whole tar archive (compressed or not), end-of-archive marker included:
    without a stated size, that is how a download cut short (even between two members) is told from a shard."""
    import warnings  # noqa: PLC0415 - stdlib, used on this path only


    try:
        with warnings.catch_warnings(), open(path, "rb") as f:
            warnings.simplefilter("error", TruncatedTarWarning)
            for _ in iter_tar(f, url):
                pass
    except (TarFormatError, TruncatedTarWarning) as e:
        raise OpenError(f"{url!r}: the download ({written} bytes, no size stated by the server) is not a complete "
                        f"tar archive, so it was not cached ({e}); the connection may have closed early: read it "
                        "again", url=url) from e


def _read_into(stream: Any, view: memoryview) -> int:
    data = stream.read(len(view))
    view[: len(data)] = data
    return len(data)


def cache_opener(cache_dir: str | os.PathLike[str] | None, cache_size: int | None = None,
                 **kw: Any) -> ShardCache | None:
    """The cache of ``WebDataset(cache_dir=, cache_size=)``: arguments win over ``SHARDSTREAM_CACHE_DIR`` /
    ``SHARDSTREAM_CACHE_SIZE``; None (no caching) when neither names a directory. A negative size: no limit.

    >>> from shardstream.config import Settings
    >>> cache_opener(None, settings=Settings()) is None
    True
    >>> cache_opener("c", 100).max_bytes
    100
    """
    settings = kw.pop("settings", None) or get_settings()
    directory = os.fspath(cache_dir) if cache_dir is not None else settings.cache_dir
    if not directory:
        return None
    size = cache_size if cache_size is not None and cache_size >= 0 else settings.cache_size
    return ShardCache(directory, size, verbose=kw.pop("verbose", settings.verbose), **kw)
