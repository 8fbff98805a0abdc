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
from collections.abc import Mapping
from typing import Any, TypeVar

from .errors import ConfigError

__all__ = ["ENV_PREFIX", "Settings", "choose", "get_settings"]

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
    #: SHARDSTREAM_URL_REWRITES: prefix rewrite rules ``from=to``, separated by ``;`` or spaces; first match wins.
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

    _PARSERS = {
        "cache_dir": _parse_str,
        "cache_size": _parse_size,
        "verbose": _parse_bool,
        "url_rewrites": _parse_list,
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
    }
    #: fields read from a standard (unprefixed) variable instead of SHARDSTREAM_<FIELD>
    _ENV_NAMES = {
        "rank": "RANK", "world_size": "WORLD_SIZE", "local_rank": "LOCAL_RANK", "ais_endpoint": "AIS_ENDPOINT",
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``environ`` (default: ``os.environ``); unset variables keep the defaults."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            name = cls._ENV_NAMES.get(field.name, ENV_PREFIX + field.name.upper())
            if name in env:
                values[field.name] = cls._PARSERS[field.name](name, env[name])
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed (explicit values from code)."""
        return dataclasses.replace(self, **changes)


def get_settings() -> Settings:
    """The process settings, read from the environment now (cheap; call it where a default is needed)."""
    return Settings.from_env()


def choose(explicit: T | None, setting: T) -> T:
    """Explicit argument wins; fall back to the setting. ``choose(None, 5) == 5``; ``choose(0, 5) == 0``."""
    return setting if explicit is None else explicit
