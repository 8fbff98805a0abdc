"""The :class:`Settings` dataclass: every setting the environment can give, with its default and its variable.

Reached as ``shardstream.config.Settings`` (or ``shardstream.Settings``): :mod:`shardstream.config` reads the
environment and loads this module on first use, so that ``import shardstream`` does not pay for
:mod:`dataclasses` (which imports :mod:`inspect`, :mod:`ast`, :mod:`dis` and :mod:`tokenize`).

>>> from shardstream.config import Settings
>>> s = Settings.from_env({"SHARDSTREAM_CACHE_DIR": "/tmp/cache", "SHARDSTREAM_VERBOSE": "1"})
>>> s.cache_dir, s.verbose, s.replace(verbose=False).verbose
('/tmp/cache', True, False)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .config import (
    _parse_bool,
    _parse_float,
    _parse_int,
    _parse_lines,
    _parse_list,
    _parse_size,
    _parse_str,
    settings_values,
)

__all__ = ["Settings"]


@dataclasses.dataclass(frozen=True)
class Settings:
    """Process-wide defaults, read from ``SHARDSTREAM_*`` environment variables.

    Each field is documented with the variable that sets it.
    """

    #: SHARDSTREAM_CACHE_DIR: directory of the local shard cache (None: no caching unless asked for).
    cache_dir: str | None = None
    #: SHARDSTREAM_CACHE_SIZE: size limit of the shard cache in bytes (accepts 10G, 500M).
    cache_size: int | None = None
    #: SHARDSTREAM_VERBOSE: log what is opened, cached and written on stderr (the ``shardstream`` logger at INFO).
    verbose: bool = False
    #: SHARDSTREAM_URL_REWRITES: prefix rewrite rules ``from=to``, separated by ``;`` (or newlines; spaces around a
    #: rule are dropped, spaces inside it kept: ``gs://b/=/mnt/My Data/``); first match wins.
    url_rewrites: tuple[str, ...] = ()
    #: SHARDSTREAM_STORAGE_CONFIG: path of a YAML/TOML file with per-bucket storage settings.
    storage_config: str | None = None
    #: SHARDSTREAM_HTTP_RETRIES: how many times a broken HTTP/object-store read is retried.
    http_retries: int = 5
    #: SHARDSTREAM_HTTP_TIMEOUT: socket timeout in seconds for remote reads.
    http_timeout: int = 60
    #: SHARDSTREAM_BUFSIZE: read size in bytes for streaming shards.
    bufsize: int = 1 << 20
    #: SHARDSTREAM_NO_EXTENSIONS: use the pure-Python paths even when the C accelerator is built.
    no_extensions: bool = False
    #: SHARDSTREAM_HTTP_BACKOFF: first retry delay in seconds (doubled at each retry, with jitter, up to 30 s).
    http_backoff: float = 0.5
    #: SHARDSTREAM_HTTP_HEADERS: extra HTTP request headers ``Name: value``, separated by ``;`` or newlines.
    http_headers: tuple[str, ...] = ()
    #: SHARDSTREAM_STORAGE: per-bucket storage settings inline (YAML or JSON text, same schema as the file).
    storage: str | None = None
    #: SHARDSTREAM_BLOCK_SIZE: size of the ranged reads from object stores (s3://, gs://, ...).
    block_size: int = 16 << 20
    #: AIS_ENDPOINT (AIStore's own variable): the AIStore gateway that serves ``ais://`` URLs.
    ais_endpoint: str | None = None
    #: SHARDSTREAM_USE_AIS_FOR: schemes read through the AIStore gateway instead of directly (e.g. ``gs s3``).
    use_ais_for: tuple[str, ...] = ()
    #: RANK (as set by torchrun / SLURM launchers): this process's rank when torch.distributed is not initialised.
    rank: int | None = None
    #: WORLD_SIZE: number of ranks when torch.distributed is not initialised.
    world_size: int | None = None
    #: LOCAL_RANK: rank of this process on its node.
    local_rank: int | None = None
    #: SHARDSTREAM_SECURE (or webdataset's WDS_SECURE): secure mode: no ``pipe:`` URLs, no local files, no URL
    #: rewriting from the environment, no unpickling (the URL rule: :func:`shardstream.io.trust.check_url`).
    secure: bool = False
    #: SHARDSTREAM_ALLOW_OBSOLETE (or webdataset's ALLOW_OBSOLETE): allow webdataset's obsolete functions.
    allow_obsolete: bool = False
    #: every WDS_<NAME> variable: the values of ``${NAME}`` in shard URLs (webdataset's ``envsubst``).
    url_vars: tuple[tuple[str, str], ...] = ()
    #: SHARDSTREAM_HTTP_CONNECTIONS: parallel ranged GETs of http(s)/s3 shards per process, shared by its
    #: DataLoader workers (each gets its share, at least 2); 1 reads each shard through one stream.
    http_connections: int = 16
    #: SHARDSTREAM_HTTP_PART_SIZE: size of each ranged GET of a shard (accepts 8M).
    http_part_size: int = 8 << 20
    #: SHARDSTREAM_HTTP_READAHEAD: memory for the parts read ahead of the reader, per process, shared by its
    #: DataLoader workers (accepts 256M).
    http_readahead: int = 256 << 20
    #: http_proxy / HTTP_PROXY (the lower-case name wins): the proxy of plain http requests.
    http_proxy: str | None = None
    #: https_proxy / HTTPS_PROXY: the proxy (a CONNECT tunnel) of https requests.
    https_proxy: str | None = None
    #: no_proxy / NO_PROXY: hosts and domains reached without the proxy, separated by commas (``*``: all).
    no_proxy: str | None = None
    #: SHARDSTREAM_MAX_OPEN_SHARDS: shards a random-access reader keeps open at once per process (least recently
    #: used closed first); also capped at a quarter of the soft RLIMIT_NOFILE.
    max_open_shards: int = 256
    #: SHARDSTREAM_MMAP: read local shards through memory maps (fast): random access, ``zero_copy``, and streaming
    #: through windows where the C walk prefetches. 0: through ``pread`` instead, so a shard truncated while open
    #: raises a typed error instead of killing the process with SIGBUS.
    mmap: bool = True
    #: SHARDSTREAM_MAX_DECODED_BYTES: the most bytes one field may inflate to when decoded (``.gz`` layers, ``.npz``
    #: members, declared ``.npy`` shapes); accepts 2G, 512M. Checked above 16 MiB (smaller values act as 16 MiB).
    max_decoded_bytes: int = 1 << 30
    #: SHARDSTREAM_MAX_IMAGE_PIXELS: the most pixels (width x height, from the header, before decoding) of one image.
    #: Checked above 4 Mpx (smaller values act as 4 Mpx).
    max_image_pixels: int = 100_000_000
    #: SHARDSTREAM_FSYNC: flush finished shards (and their directory) to disk before and after renaming them
    #: into place, so a power loss never leaves a short shard under its final name. 0: skip (faster, less safe).
    fsync: bool = True

    _PARSERS = {
        "cache_dir": _parse_str,
        "cache_size": _parse_size,
        "verbose": _parse_bool,
        "url_rewrites": _parse_lines,
        "storage_config": _parse_str,
        "http_retries": _parse_int,
        "http_timeout": _parse_int,
        "bufsize": _parse_size,
        "no_extensions": _parse_bool,
        "rank": _parse_int,
        "world_size": _parse_int,
        "local_rank": _parse_int,
        "http_backoff": _parse_float,
        "http_headers": _parse_lines,
        "storage": _parse_str,
        "block_size": _parse_size,
        "ais_endpoint": _parse_str,
        "use_ais_for": _parse_list,
        "secure": _parse_bool,
        "allow_obsolete": _parse_bool,
        "http_connections": _parse_int,
        "http_part_size": _parse_size,
        "http_readahead": _parse_size,
        "http_proxy": _parse_str,
        "https_proxy": _parse_str,
        "no_proxy": _parse_str,
        "max_open_shards": _parse_int,
        "mmap": _parse_bool,
        "max_decoded_bytes": _parse_size,
        "max_image_pixels": _parse_int,
        "fsync": _parse_bool,
    }
    #: fields read from a standard (unprefixed) variable instead of SHARDSTREAM_<FIELD>
    _ENV_NAMES = {
        "rank": "RANK", "world_size": "WORLD_SIZE", "local_rank": "LOCAL_RANK", "ais_endpoint": "AIS_ENDPOINT",
        "http_proxy": "HTTP_PROXY", "https_proxy": "HTTPS_PROXY", "no_proxy": "NO_PROXY", "url_vars": "WDS_<NAME>",
    }
    #: a name that wins over the one above when both are set (the lower-case proxy variables, as in curl)
    _ENV_FIRST = {"http_proxy": "http_proxy", "https_proxy": "https_proxy", "no_proxy": "no_proxy"}
    #: webdataset's names for the same settings, read when the shardstream variable is not set
    #: (GOPEN_REWRITE / WDS_REWRITE hold ``FROM=TO`` rules separated by ``;``, as SHARDSTREAM_URL_REWRITES does)
    _WDS_NAMES = {
        "cache_dir": ("WDS_CACHE",), "cache_size": ("WDS_CACHE_SIZE",), "secure": ("WDS_SECURE",),
        "url_rewrites": ("GOPEN_REWRITE", "WDS_REWRITE"), "allow_obsolete": ("ALLOW_OBSOLETE",),
    }
    #: WDS_* variables that are settings, not ``${NAME}`` values
    _WDS_SETTINGS = frozenset({"WDS_CACHE", "WDS_CACHE_SIZE", "WDS_SECURE", "WDS_REWRITE"})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``environ`` (default: the process's environment); unset variables keep the
        defaults. :mod:`shardstream.config` reads the variables: the one reader of the environment."""
        return cls(**settings_values(cls, environ))

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed (explicit values from code)."""
        return dataclasses.replace(self, **changes)
