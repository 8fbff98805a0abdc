"""Object stores through fsspec: ``s3://``, ``gs://``/``gcs://``, ``az://``/``abfs://``/``abfss://``, ``hf://``.

Each scheme needs its fsspec implementation, installed with an extra (``pip install 'shardstream[s3]'``:
s3fs; ``[gcs]``: gcsfs; ``[azure]``: adlfs; ``[hf]``: huggingface_hub); without it, opening such a URL raises
:class:`~shardstream.errors.MissingDependencyError` naming the extra. The filesystem of a URL is built with
the options of its bucket or prefix from :mod:`shardstream.io.storage_config` (endpoint, region,
credentials, addressing style), so buckets on different services can be mixed in one pipeline.

``s3://`` objects are read by the native HTTP client from a URL that s3fs signs: parallel ranged GETs
(:mod:`shardstream.io.ranged`), with the retries, exact resume, ETag checks and proxies of ``https://`` shards. The other stores,
and S3 with TLS settings of its own, are read by :class:`ObjectStream`: blocks of ``SHARDSTREAM_BLOCK_SIZE``
(16 MiB; the first one 256 KiB and the next ones doubling, so the first bytes come early) fetched ahead in the
background, each failed read retried from the exact byte offset it reached, reads
pinned to the object's ETag (an object replaced mid-read is an OpenError, never a spliced shard).

>>> protocol_of("s3://bucket/a.tar"), protocol_of("abfss://c@acct.dfs.core.windows.net/a.tar")
('s3', 'abfs')
>>> EXTRAS["gs"]
('gcs', 'gcsfs')
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import errno
import importlib
import io
import random
import time
from collections.abc import Callable
from typing import IO, Any, cast

from ..config import get_settings
from ..errors import ConfigError, MissingDependencyError, OpenError, ShardstreamError
from ..redact import redacting_logger
from .chunks import Chunks, drain_into, take_chunk
from .prefetch import open_in_series
from .proxy import route_from_settings
from .s3 import S3Body, presigned_url, sigv4_url
from .storage_config import storage_options
from .web import open_http

__all__ = ["EXTRAS", "ObjectStream", "filesystem_for", "glob_objects", "is_object_store", "open_object", "protocol_of"]

#: fsspec protocol -> (shardstream extra, module that provides it)
EXTRAS = {
    "s3": ("s3", "s3fs"),
    "gs": ("gcs", "gcsfs"),
    "az": ("azure", "adlfs"),
    "abfs": ("azure", "adlfs"),
    "hf": ("hf", "huggingface_hub"),
}
_PROTOCOLS = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs", "az": "az", "abfs": "abfs", "abfss": "abfs",
              "hf": "hf"}
_MAX_BACKOFF = 30.0
log = redacting_logger(__name__)


def protocol_of(url: str) -> str:
    """The fsspec protocol that serves ``url`` (``gcs`` -> ``gs``, ``abfss`` -> ``abfs``, ``s3a`` -> ``s3``)."""
    scheme = url.partition("://")[0].lower()
    if scheme not in _PROTOCOLS:
        raise ConfigError(f"{url!r} is not an object store URL (s3://, gs://, az://, abfs://, hf://)")
    return _PROTOCOLS[scheme]


def is_object_store(url: str) -> bool:
    """Whether ``url`` names an object (``s3://``, ``gs://``, ``az://``...: see :func:`protocol_of`)."""
    return url.partition("://")[0].lower() in _PROTOCOLS if "://" in url else False


def filesystem_for(url: str, settings: Any = None, **extra: Any) -> tuple[Any, str]:
    """``(fsspec filesystem, path)`` for ``url``, with the storage options of its bucket or prefix."""
    import fsspec  # noqa: PLC0415 - a heavy import that only object-store URLs need

    protocol = protocol_of(url)
    options = {**storage_options(url, protocol, settings), **extra}
    if protocol == "s3":
        options = _with_proxy(options, settings)
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ImportError as e:
        extra_name, module = EXTRAS[protocol]
        raise MissingDependencyError(f"reading {protocol}:// URLs", extra_name, module) from e
    if protocol == "gs":
        cls = _gcs_class(cls, options)
    try:
        fs = cls(**options)
    except (ImportError, ShardstreamError):
        raise
    except Exception as e:  # noqa: BLE001 - each library raises its own (adlfs: ValueError without credentials)
        # not chained: the cause's own text may quote a credential (gcsfs quotes a raw token); this one is redacted
        raise ConfigError(f"{url!r}: cannot set up the {protocol}:// client ({type(e).__name__}: {e}); "
                          f"{_CREDENTIALS.get(protocol, _CREDENTIALS[''])}") from None
    return fs, cls._strip_protocol(url)


#: what to check when a file system cannot be built (the fix named by the ConfigError)
_CREDENTIALS = {
    "az": "give the container's storage rule options: {connection_string: ...} or {account_name: ..., "
          "account_key: ...} (or sas_token), or set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME "
          "with AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN",
    "": "check the credentials and options of this URL's storage rule (StorageConfig.match(url)) and the "
          "client's own settings",
}
_CREDENTIALS["abfs"] = _CREDENTIALS["az"]


def glob_objects(pattern: str) -> list[str]:
    """The object URLs that match the glob ``pattern`` (``az://container/train-*.tar``), sorted, listed through
    the file system of the pattern's bucket with its storage settings; an OpenError names the pattern when the
    listing fails (no such bucket, no permission to list)."""
    fs, path = filesystem_for(pattern)
    scheme = pattern.partition("://")[0]
    try:
        found = fs.glob(path)
    except Exception as e:  # noqa: BLE001 - each library raises its own
        raise OpenError(f"cannot list {pattern!r}: {type(e).__name__}: {e}", url=pattern) from e
    return sorted(f"{scheme}://{name}" for name in found)


def _gcs_class(cls: Any, options: dict[str, Any]) -> Any:
    """gcsfs's JSON-API filesystem for an endpoint other than Google's (an emulator, a gateway), else ``cls``.

    Recent gcsfs versions default to a subclass that asks a gRPC control plane for each bucket's layout before it
    reads or writes; a server without one makes every such call wait out a 60 s retry, so those endpoints get
    the plain class (buckets of special layouts exist only on Google's service).
    """
    from urllib.parse import urlsplit  # noqa: PLC0415 - stdlib, used on this path only

    module = importlib.import_module("gcsfs.core")
    core, default_location = getattr(module, "GCSFileSystem", None), getattr(module, "_location", None)
    if core is None or cls is core or not issubclass(cls, core):
        return cls
    # the endpoint: the option, else gcsfs's own reading of STORAGE_EMULATOR_HOST (else Google's)
    location = options.get("endpoint_url") or (default_location() if callable(default_location) else "")
    host = (urlsplit(location).hostname or "").lower()
    return cls if not host or host == "googleapis.com" or host.endswith(".googleapis.com") else core


def _with_proxy(options: dict[str, Any], settings: Any) -> dict[str, Any]:
    """s3fs options with the proxy of the settings (``HTTPS_PROXY``...) for the endpoint, unless ``NO_PROXY``
    exempts it or the options name proxies of their own."""
    from urllib.parse import urlsplit  # noqa: PLC0415 - stdlib, used on this path only


    endpoint = urlsplit(options.get("endpoint_url") or "https://s3.amazonaws.com")
    proxy = route_from_settings(settings or get_settings()).proxy_for(endpoint.scheme, endpoint.hostname or "",
                                                                       endpoint.port)
    config = dict(options.get("config_kwargs") or {})
    if proxy is None or "proxies" in config:
        return options
    config["proxies"] = {endpoint.scheme: proxy}
    return {**options, "config_kwargs": config}


def _permanent(exc: BaseException) -> bool:
    """Errors that a retry cannot fix: missing object, no permission, bad request, object changed (s3fs reports
    a failed ``If-Match`` as ``OSError(EINVAL)``)."""
    if type(exc).__name__ == "FileExpired":  # s3fs.utils.FileExpired: the ETag changed
        return True
    return isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, ValueError)) or (
        isinstance(exc, OSError) and exc.errno == errno.EINVAL)


#: the size of an object's first block; the next ones double up to the block size
FIRST_BLOCK = 256 << 10


class ObjectStream(io.RawIOBase):
    """An object read in large ranged requests with read-ahead and exact resume (see the module docstring).

    ``size`` is the object's size, ``etag`` its ETag (None when the store gives none), ``md5`` its MD5 hex
    digest where the store states it (the shard cache verifies it).
    """

    def __init__(self, url: str, fs: Any, path: str, *, block_size: int = 16 << 20, prefetch: int = 2,
                 retries: int = 5, backoff: float = 0.5, sleep: Callable[[float], None] = time.sleep):
        self.url, self.name = url, url
        self.block_size, self.retries, self.backoff, self._sleep = max(1, block_size), retries, backoff, sleep
        self.retried = 0  #: ranged reads retried so far
        try:
            self._file = fs.open(path, "rb", block_size=self.block_size, cache_type="none")
        except Exception as e:
            raise OpenError(f"cannot open {url!r}: {type(e).__name__}: {e}", url=url) from e
        details = getattr(self._file, "details", None) or {}
        self.size: int = int(self._file.size)
        self.etag: str | None = details.get("ETag") or details.get("etag")
        self.md5 = _md5_of(details)
        s3 = getattr(fs, "protocol", None) in ("s3", ("s3", "s3a")) and hasattr(fs, "_call_s3")
        self._s3 = S3Body(fs, path, self.etag) if s3 else None
        self._get = self._s3 or self._file._fetch_range
        self.pos = 0
        self._chunks: Chunks = collections.deque()  # bytes, or memoryviews of partly read ones
        self._next = 0  # offset of the next block to request
        # the first blocks are small and double up to block_size: the first bytes come after a small request,
        # not after a whole 16 MiB block (S3 streams one request: its blocks only cut that stream)
        self._grow = self.block_size if s3 else min(self.block_size, FIRST_BLOCK)
        self._pending: collections.deque[concurrent.futures.Future[list[Any]]] = collections.deque()
        workers = 1 if self._s3 else max(1, prefetch)  # S3: one streaming request, blocks fetched in order
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="shardstream-get")
        self._depth = max(1, prefetch)

    def _fetch(self, start: int, end: int) -> list[Any]:
        """Bytes ``[start, end)`` as a list of chunks, retried from the exact offset reached until complete."""
        parts: list[Any] = []
        failures, at = 0, start
        while at < end:
            try:
                data = self._get(at, end)
            except Exception as e:  # noqa: BLE001 - each library raises its own; permanent ones are re-raised
                if _permanent(e):
                    changed = type(e).__name__ == "FileExpired" or "condition" in str(e).lower()
                    what = "the object changed while it was being read" if changed else f"{type(e).__name__}: {e}"
                    raise OpenError(f"{self.url!r}: {what}", url=self.url) from e
                failures += 1
                self._retry(failures, e, at)
                continue
            got = sum(map(len, data)) if isinstance(data, list) else len(data)
            if got:
                parts.extend(data) if isinstance(data, list) else parts.append(data)
                at += got
                failures = 0
            else:
                failures += 1
                self._retry(failures, EOFError(f"empty answer for bytes {at}-{end - 1}"), at)
        return parts

    def _retry(self, failures: int, cause: BaseException, at: int) -> None:
        if failures > self.retries:
            raise OpenError(f"{self.url!r}: reading at byte {at} of {self.size} failed after {self.retries} "
                            f"retries: {type(cause).__name__}: {cause}", url=self.url) from cause
        self.retried += 1
        delay = min(_MAX_BACKOFF, self.backoff * 2 ** (failures - 1)) * random.uniform(0.5, 1.0)
        log.info("%s: reading at byte %d of %s failed (%s: %s); retry %d of %d in %.2f s", self.url, at, self.size,
                 type(cause).__name__, cause, failures, self.retries, delay)
        self._sleep(delay)

    def _fill(self) -> bool:
        while len(self._pending) < self._depth and self._next < self.size:
            end = min(self.size, self._next + self._grow)
            self._pending.append(self._pool.submit(self._fetch, self._next, end))
            self._next, self._grow = end, min(self.block_size, 2 * self._grow)
        if not self._pending:
            return False
        self._chunks.extend(c if isinstance(c, bytes) else memoryview(c).cast("B")
                            for c in self._pending.popleft().result() if len(c))
        return True

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.closed:
            raise ValueError("read from a closed ObjectStream")
        if not self._chunks and not self._fill():
            return 0
        n = drain_into(self._chunks, memoryview(b).cast("B"))  # as much as is here, without waiting for the next block
        self.pos += n
        return n

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes (all that is left for -1), in as few copies as possible."""
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(self.block_size), b""))
        if not self._chunks and not self._fill():
            return b""
        head = take_chunk(self._chunks, size)  # the common case: a whole chunk, handed over without a copy
        self.pos += len(head)
        return head

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        if not self.closed:
            for future in self._pending:
                future.cancel()
            self._pending.clear()
            self._pool.shutdown(wait=False, cancel_futures=True)
            if self._s3 is not None:
                self._s3.close()
            self._file.close()
        super().close()

    def __repr__(self) -> str:
        return f"ObjectStream({self.url!r}, pos={self.pos}, size={self.size})"


def _md5_of(details: dict[str, Any]) -> str | None:
    """The MD5 a store states for an object (GCS ``md5Hash``, Azure ``content_md5``), as hex; else None.

    An S3 ETag is *not* taken for an MD5: it is one only for single-part uploads without KMS encryption, and
    the object's details do not say which.
    """
    settings = details.get("content_settings")
    for value in (details.get("md5Hash"), details.get("content_md5"), getattr(settings, "content_md5", None),
                  settings.get("content_md5") if isinstance(settings, dict) else None):
        if isinstance(value, (bytes, bytearray)) and len(value) == 16:
            return bytes(value).hex()
        if isinstance(value, str) and value:
            try:
                return base64.b64decode(value, validate=True).hex()
            except ValueError:
                return None
    return None


def open_object(url: str) -> IO[bytes]:
    """The opener of object store URLs.

    ``s3://``: a GET URL signed with the credentials, endpoint and addressing style of the storage settings (by
    :func:`~shardstream.io.s3.sigv4_url` when they say all it needs, else by s3fs), read by the
    native HTTP client (:func:`~shardstream.io.web.open_http`: parallel ranged GETs), with the same
    retries, exact resume, ETag checks and proxies as ``https://`` shards (a read must resume within the
    signature's 12 hours). Other stores, and S3 with custom TLS settings: an :class:`ObjectStream`.
    """
    settings = get_settings()
    s3 = protocol_of(url) == "s3"
    if s3 and sigv4_url(url, settings) is not None:  # signed here: s3fs is not even imported
        log.debug("%s: read by the HTTP client from a URL signed here (SigV4)", url)
        return _open_signed(url, settings, lambda target: sigv4_url(target, settings))
    fs, path = filesystem_for(url, settings)
    if s3 and presigned_url(fs, path) is not None:
        log.debug("%s: read by the HTTP client from a URL signed by s3fs", url)
        return _open_signed(url, settings, lambda target: presigned_url(*filesystem_for(target, settings)))
    log.debug("%s: read through fsspec (%s) in blocks of %d bytes", url, type(fs).__name__, settings.block_size)
    return cast(IO[bytes], ObjectStream(url, fs, path, block_size=settings.block_size, retries=settings.http_retries,
                                        backoff=settings.http_backoff))


def _open_signed(url: str, settings: Any, sign: Callable[[str], str | None]) -> IO[bytes]:
    """``url`` read through the native HTTP client from the GET URL ``sign(url)`` (the next shards opened ahead
    are signed the same way)."""

    def open_signed(target: str) -> IO[bytes]:
        link = sign(target)
        if link is None:  # pragma: no cover - the same bucket signed a moment ago
            raise OpenError(f"{target!r}: cannot sign a GET URL", url=target)
        return open_http(link, name=target, headers={}, series=False)

    return open_in_series(url, open_signed, settings) if settings.http_connections > 1 else open_signed(url)
