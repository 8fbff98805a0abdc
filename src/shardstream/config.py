"""Settings: the ONLY module that reads environment variables.

Everything configurable from the environment is a field of :class:`Settings`. Code elsewhere receives a
``Settings`` (or calls :func:`get_settings`) and never touches ``os.environ`` itself. Explicit arguments always
win over settings: use :func:`choose` to pick between them.

``Settings`` (a dataclass, defined in :mod:`shardstream._settings`) loads on first use: ``import shardstream``
reads only ``SHARDSTREAM_VERBOSE`` (:func:`verbose_requested`) and does not import :mod:`dataclasses`.

>>> from shardstream.config import Settings
>>> s = Settings.from_env({"SHARDSTREAM_CACHE_DIR": "/tmp/cache", "SHARDSTREAM_VERBOSE": "1"})
>>> s.cache_dir, s.verbose
('/tmp/cache', True)
>>> choose("/explicit", s.cache_dir)
'/explicit'
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigError

if TYPE_CHECKING:
    from ._settings import Settings as Settings

__all__ = [
    "ENV_PREFIX", "SECURE_REFUSALS", "Settings", "choose", "get_settings", "secure_mode", "secure_refusal",
    "settings_values", "verbose_requested",
]

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


def settings_values(cls: type[Settings], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The fields of ``cls`` (:class:`Settings`) that ``environ`` (default: ``os.environ``) sets, parsed: the work
    of :meth:`Settings.from_env`, here with every other reading of the environment."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for field, parse in cls._PARSERS.items():
        first = cls._ENV_FIRST.get(field)
        own = cls._ENV_NAMES.get(field, ENV_PREFIX + field.upper())
        names = (*((first,) if first is not None else ()), own, *cls._WDS_NAMES.get(field, ()))
        name = next((n for n in names if n in env), None)
        if name is not None:
            values[field] = parse(name, env[name])
    values["url_vars"] = tuple(sorted((k[4:], v) for k, v in env.items() if k.startswith("WDS_")
                                      and k not in cls._WDS_SETTINGS))
    return values


def verbose_requested() -> bool:
    """Whether ``SHARDSTREAM_VERBOSE`` asks for the log on stderr (:attr:`Settings.verbose`), read without building
    the settings: ``import shardstream`` asks it. A malformed value is False here (it raises where the settings
    are read).

    >>> verbose_requested() in (True, False)
    True
    """
    name = ENV_PREFIX + "VERBOSE"
    try:
        return _parse_bool(name, os.environ.get(name, ""))
    except ConfigError:
        return False


def _settings_class() -> type[Settings]:
    """:class:`Settings`, loaded on first use (with :mod:`dataclasses`), as ``shardstream/__init__.py`` loads its
    lazy names; then also a name of this module."""
    cls: type[Settings] = importlib.import_module("shardstream._settings").Settings
    globals()["Settings"] = cls
    return cls


def __getattr__(name: str) -> Any:
    """``config.Settings`` (and ``from shardstream.config import Settings``) on first use (PEP 562)."""
    if name == "Settings":
        return _settings_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LAST: tuple[Any, Settings] | None = None  # (the environment it was read from, the settings)


def get_settings() -> Settings:
    """The process settings as the environment says now (cheap; call it where a default is needed): read again
    whenever any variable changed, else the settings read last time (reading them costs ~0.1 ms; a shard open
    asks several times).

    >>> from shardstream.config import Settings
    >>> os.environ["SHARDSTREAM_HTTP_RETRIES"] = "7"; get_settings().http_retries
    7
    >>> del os.environ["SHARDSTREAM_HTTP_RETRIES"]; get_settings().http_retries == Settings().http_retries
    True
    """
    global _LAST
    data = getattr(os.environ, "_data", None)  # CPython's raw environment: compared in C, ~1 us
    snapshot = None if data is None else tuple(data.items())
    last = _LAST
    if last is not None and snapshot is not None and last[0] == snapshot:
        return last[1]
    settings = _settings_class().from_env()
    if snapshot is not None:
        _LAST = (snapshot, settings)
    return settings


def choose(explicit: T | None, setting: T) -> T:
    """Explicit argument wins; fall back to the setting. ``choose(None, 5) == 5``; ``choose(0, 5) == 0``."""
    return setting if explicit is None else explicit


def secure_mode(settings: Settings | None = None) -> bool:
    """Whether secure mode is on: ``SHARDSTREAM_SECURE`` / ``WDS_SECURE`` in the settings, or webdataset's
    runtime switch ``shardstream.utils.enforce_security`` (set from the same variables when that module loads).

    >>> from shardstream.config import Settings
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
