"""Secure mode for opening URLs (webdataset's ``WDS_SECURE=1`` / ``utils.enforce_security = True``).

In secure mode a dataset may only be read from remote URLs: ``pipe:`` commands, local files (paths and
``file:``) and URL rewriting from the environment are refused with a :class:`~shardstream.errors.ConfigError`
(a ``ValueError``, as in webdataset); unpickling is refused by the decoder. Standard input/output (``-``)
stays allowed, as in webdataset.

>>> from shardstream.config import Settings
>>> check_url("https://example.com/a.tar", Settings(secure=True))
>>> check_url("pipe:cat a.tar", Settings(secure=True))
Traceback (most recent call last):
...
shardstream.errors.ConfigError: secure mode (WDS_SECURE / SHARDSTREAM_SECURE / utils.enforce_security) refuses 'pipe:cat a.tar': pipe: URLs run commands; unset secure mode to open it
>>> check_url("pipe:cat a.tar", Settings())
"""

from __future__ import annotations

from ..config import Settings, get_settings, secure_mode
from ..errors import ConfigError
from .urls import split_scheme

__all__ = ["check_url"]

_WHY = {"pipe": "pipe: URLs run commands", "file": "local files are not allowed", "": "local files are not allowed"}


def check_url(url: str, settings: Settings | None = None) -> None:
    """Raise :class:`~shardstream.errors.ConfigError` if secure mode is on and ``url`` is a command or local."""
    if url == "-" or not secure_mode(settings or get_settings()):
        return
    scheme, _ = split_scheme(url)
    if scheme in _WHY:
        raise ConfigError(
            f"secure mode (WDS_SECURE / SHARDSTREAM_SECURE / utils.enforce_security) refuses {url!r}: "
            f"{_WHY[scheme]}; unset secure mode to open it"
        )
