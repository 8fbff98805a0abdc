"""Settings: the ONLY module that reads environment variables.

Everything configurable from the environment is a field of :class:`Settings`. Code elsewhere receives a
``Settings`` (or calls :func:`get_settings`) and never touches ``os.environ`` itself. Explicit arguments always
win over settings: use :func:`choose` to pick between them.

>>> s = Settings.from_env({"SHARDSTREAM_CACHE_DIR": "/tmp/cache", "SHARDSTREAM_VERBOSE": "1"})
>>> s.cache_dir, s.verbose
('/tmp/cache', True)
>>> choose("/explicit", s.cache_dir)
'/explicit'
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from typing import Any, TypeVar

from .errors import ConfigError

__all__ = ["ENV_PREFIX", "SECURE_REFUSALS", "Settings", "choose", "get_settings", "secure_mode", "secure_refusal"]

ENV_PREFIX = "SHARDSTREAM_"
T = TypeVar("T")


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"environment variable {name}={text!r} is not a boolean; use 1/0, true/false, yes/no")


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text.strip().replace("_", ""))
    except ValueError:
        raise ConfigError(f"environment variable {name}={text!r} is not an integer") from None


def _parse_size(name: str, text: str) -> int:
    """Parse ``"10G"``, ``"512M"``, ``"1000"`` into bytes."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:] if t else "", 1)
    digits = t[:-1] if mult != 1 else t
    try:
        return int(float(digits) * mult)
    except ValueError:
        raise ConfigError(f"environment variable {name}={text!r} is not a size (e.g. 500M, 10G)") from None


def _parse_str(name: str, text: str) -> str:
    return text


def _parse_float(name: str, text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ConfigError(f"environment variable {name}={text!r} is not a number") from None


def _parse_lines(name: str, text: str) -> tuple[str, ...]:
    """``;``- or newline-separated entries (for values that contain spaces, such as HTTP headers)."""
    return tuple(p.strip() for p in text.replace("\n", ";").split(";") if p.strip())


def _parse_list(name: str, text: str) -> tuple[str, ...]:
    """Whitespace- or ``;``-separated list."""
    return tuple(p for p in text.replace(";", " ").split() if p)


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
        """Build settings from ``environ`` (default: ``os.environ``); unset variables keep the defaults."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name not in cls._PARSERS:
                continue
            first = cls._ENV_FIRST.get(field.name)
            own = cls._ENV_NAMES.get(field.name, ENV_PREFIX + field.name.upper())
            names = (*((first,) if first is not None else ()), own, *cls._WDS_NAMES.get(field.name, ()))
            name = next((n for n in names if n in env), None)
            if name is not None:
                values[field.name] = cls._PARSERS[field.name](name, env[name])
        values["url_vars"] = tuple(sorted((k[4:], v) for k, v in env.items() if k.startswith("WDS_")
                                          and k not in cls._WDS_SETTINGS))
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed (explicit values from code)."""
        return dataclasses.replace(self, **changes)


_LAST: tuple[Any, Settings] | None = None  # (the environment it was read from, the settings)


def get_settings() -> Settings:
    """The process settings as the environment says now (cheap; call it where a default is needed): read again
    whenever any variable changed, else the settings read last time (reading them costs ~0.1 ms; a shard open
    asks several times).

    >>> os.environ["SHARDSTREAM_HTTP_RETRIES"] = "7"; get_settings().http_retries
    7
    >>> del os.environ["SHARDSTREAM_HTTP_RETRIES"]; get_settings().http_retries == Settings().http_retries
    True
    """
    global _LAST
    data = getattr(os.environ, "_data", None)  # CPython's raw environment: compared in C, ~1 us
    if data is None:
        return Settings.from_env()
    snapshot = tuple(data.items())
    last = _LAST
    if last is not None and last[0] == snapshot:
        return last[1]
    settings = Settings.from_env()
    _LAST = (snapshot, settings)
    return settings


def choose(explicit: T | None, setting: T) -> T:
    """Explicit argument wins; fall back to the setting. ``choose(None, 5) == 5``; ``choose(0, 5) == 0``."""
    return setting if explicit is None else explicit


def secure_mode(settings: Settings | None = None) -> bool:
    """Whether secure mode is on: ``SHARDSTREAM_SECURE`` / ``WDS_SECURE`` in the settings, or webdataset's
    runtime switch ``shardstream.utils.enforce_security`` (set from the same variables when that module loads).

    >>> secure_mode(Settings(secure=True))
    True
    """
    flag = getattr(sys.modules.get("shardstream.utils"), "enforce_security", None)
    if settings is None and flag is not None:
        return bool(flag)
    return (settings or get_settings()).secure or bool(flag)


#: webdataset 1.0.2's message for each thing secure mode refuses. shardstream's error starts with it (code written
#: for webdataset may match it), then says what was refused and how to allow it: :func:`secure_refusal`.
SECURE_REFUSALS: dict[str, str] = {
    "command": "gopen_pipe: unsafe_gopen is False, cannot open pipe URLs",
    "local": "gopen: unsafe_gopen is False, cannot open local files",
    "rewrite": "rewrite_url: unsafe_gopen is False, cannot rewrite URLs using environment variables",
    "unpickle": "Unpickling is not allowed for security reasons when enforce_security is set.",
}


def secure_refusal(kind: str, refused: str, fix: str = "unset secure mode to allow it") -> ConfigError:
    """The error of secure mode refusing something of ``kind`` (a key of :data:`SECURE_REFUSALS`): webdataset's
    words, then what was ``refused`` and the ``fix``. A :class:`~shardstream.errors.ConfigError`, so a
    ``ValueError`` as webdataset's.

    >>> print(secure_refusal("command", "'pipe:cat a.tar', which runs a command", "unset secure mode to open it"))
    gopen_pipe: unsafe_gopen is False, cannot open pipe URLs (secure mode, from WDS_SECURE / SHARDSTREAM_SECURE / utils.enforce_security, refuses 'pipe:cat a.tar', which runs a command; unset secure mode to open it)
    """
    return ConfigError(f"{SECURE_REFUSALS[kind]} (secure mode, from WDS_SECURE / SHARDSTREAM_SECURE / "
                       f"utils.enforce_security, refuses {refused}; {fix})")
