"""Logging: shardstream reports what it does through :mod:`logging`, never with ``print``.

Each module logs to its own child of the ``shardstream`` logger (``shardstream.io.cache``,
``shardstream.writer.shardwriter``, ``shardstream.viewer.server``, ``shardstream.cli``...): INFO for what it
did (a shard downloaded into the cache or evicted, a shard written, a request served), WARNING and ERROR for
what someone should look at. Problems in the data stream itself are :mod:`warnings` (see
:mod:`shardstream.pipeline.error_handlers`) or exceptions, as in webdataset.

The library adds no handler of its own unless asked to: configure logging in your program as usual, e.g.
``logging.getLogger("shardstream").setLevel(logging.INFO)`` with a handler, or ask for one line per record on
stderr with :func:`log_to_stderr`, ``SHARDSTREAM_VERBOSE=1`` in the environment (applied when shardstream is
imported), or ``verbose=True`` on ``ShardWriter``, ``ShardCache`` and ``ViewerServer``.

>>> import logging
>>> handler = log_to_stderr()
>>> logging.getLogger("shardstream").getEffectiveLevel() == logging.INFO
True
>>> log_to_stderr() is handler  # one handler, however often it is asked for
True
>>> stop_logging_to_stderr()
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

from .config import Settings
from .errors import ConfigError
from .redact import SecretFilter

__all__ = ["LOGGER", "apply_settings", "log_to_stderr", "progress_bar", "stop_logging_to_stderr"]

#: the name of the logger every module of the package logs under (as ``shardstream.<module>``)
LOGGER = "shardstream"
#: one line per record: ``shardstream.io.cache INFO: cached https://host/a.tar -> /cache/... (10240 bytes)``
FORMAT = "%(name)s %(levelname)s: %(message)s"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (test runners and programs replace it)."""

    def __init__(self, level: int = logging.NOTSET) -> None:
        logging.Handler.__init__(self, level)  # not StreamHandler's: ``stream`` is the property below

    @property
    def stream(self) -> TextIO:
        return sys.stderr


def _ours(logger: logging.Logger) -> _StderrHandler | None:
    return next((h for h in logger.handlers if isinstance(h, _StderrHandler)), None)


def log_to_stderr(level: int | str = logging.INFO) -> logging.Handler:
    """Show the ``shardstream`` logger's records of ``level`` and above on stderr, one line each.

    Lowers the logger's level to ``level`` where it is higher (a level set lower elsewhere stays); adds one
    handler the first time and returns the same one afterwards.

    >>> handler = log_to_stderr("DEBUG")
    >>> logging.getLogger("shardstream.io.cache").isEnabledFor(logging.DEBUG)
    True
    >>> stop_logging_to_stderr()
    """
    level = logging.getLevelName(level) if isinstance(level, str) else level
    logger = logging.getLogger(LOGGER)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    handler = _ours(logger)
    if handler is None:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(SecretFilter())
        logger.addHandler(handler)
    return handler


def stop_logging_to_stderr() -> None:
    """Undo :func:`log_to_stderr`: remove its handler and reset the ``shardstream`` logger's level.

    >>> stop_logging_to_stderr()  # nothing to undo: a no-op
    """
    logger = logging.getLogger(LOGGER)
    handler = _ours(logger)
    if handler is not None:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def apply_settings(settings: Settings | None = None) -> None:
    """``SHARDSTREAM_VERBOSE=1``: :func:`log_to_stderr` at INFO (run when shardstream is imported).

    A malformed environment is not an import error: the setting that is wrong raises where it is used.

    >>> apply_settings(Settings(verbose=False))  # the default: no handler, nothing changes
    """
    if settings is None:
        try:
            settings = Settings.from_env()
        except ConfigError:
            return
    if settings.verbose:
        log_to_stderr(logging.INFO)


def progress_bar(show: bool | None, total: int, *, desc: str, unit: str) -> Any:
    """The progress bar of a long operation (``progress=`` of ``index_dataset``, ``TrainingDataset``,
    ``IndexedDataset``, ``map_dataset``, ``convert``): a tqdm bar on stderr, or None when it is not shown.

    ``show``: True, False, or None (the default of those functions): shown when stderr is a terminal.

    >>> progress_bar(False, 10, desc="indexing", unit=" shards") is None
    True
    """
    if show is None:
        show = bool(getattr(sys.stderr, "isatty", lambda: False)())
    if not show:
        return None
    from tqdm.auto import tqdm  # noqa: PLC0415 - a heavy import that only progress bars need

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)
