"""Helpers shared by the subcommands: argument types and parents, reading shards, progress bars, messages.

Reading goes through the lowest public layers: :func:`shardstream.io.open_url` opens any URL the library reads
(paths, ``file:``, ``-``, ``pipe:``, and every registered scheme), :func:`shardstream.tar.iter_tar` walks the
members (compressed shards included) and :func:`shardstream.samples.group_samples` groups them into samples.

>>> parse_size("64K"), parse_size("1.5M"), parse_size("1e9")
(65536, 1572864, 1000000000)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from ..errors import ConfigError
from ..io import finish_stream, open_url
from ..io.urls import local_path
from ..samples import KeyRule, group_samples
from ..tar import iter_tar

__all__ = [
    "CommandError",
    "EXIT_DATA",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "META",
    "Progress",
    "dataset_samples",
    "fields",
    "human",
    "is_local_file",
    "key_rule",
    "local_path",
    "message",
    "opened",
    "parse_size",
    "plural",
    "positive_int",
    "progress",
    "progress_enabled",
    "shard_samples",
]

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_DATA = 0, 1, 2, 3

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class CommandError(Exception):
    """Stop a subcommand with a one-line message and an exit code (caught by :func:`shardstream.cli.main`).

    Only the CLI raises and catches it; library errors keep their own types (``shardstream.errors``).
    """

    def __init__(self, message: str, code: int = EXIT_DATA):
        self.code = code
        super().__init__(message)


# -- argument types --------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """A byte size: ``1000``, ``1e9``, ``64K``, ``500M``, ``1.5G``, ``2T`` (K/M/G/T are powers of 1024)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)]) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 1000000, 500M, 1.5G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size {text!r} must be positive")
    return int(value)


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def key_rule(args: argparse.Namespace, *, lowercase: bool) -> KeyRule:
    """The key rule of ``--key-rule``. Commands that rewrite shards keep the case of extensions (names are copied
    as they are); commands that read and check use the reader's rule (lower-cased extensions)."""
    return KeyRule(getattr(args, "key_rule", None) or "first-dot", lowercase=lowercase)


# -- inputs ----------------------------------------------------------------------------------------------------


def is_local_file(url: str) -> bool:
    """Whether ``url`` is a local path or ``file:`` URL (not ``-``, ``pipe:`` or a remote URL)."""
    return local_path(url) is not None


@contextlib.contextmanager
def opened(url: str) -> Iterator[IO[bytes]]:
    """Open ``url`` through :mod:`shardstream.io`; on normal exit the stream is finished (a ``pipe:`` command's
    exit status is checked), and it is always closed."""
    if url == "-" and sys.stdin is not None and sys.stdin.isatty():
        raise ConfigError("reading a shard from '-' but standard input is a terminal; pipe a tar into it")
    stream = open_url(url)
    try:
        yield stream
        finish_stream(stream)
    finally:
        stream.close()


def shard_samples(url: str, rule: KeyRule, *, handler: Callable[[BaseException], bool] | None = None
                  ) -> Iterator[dict[str, Any]]:
    """The samples of one shard (``{"__key__", "__url__", ext: bytes...}``), read sequentially."""
    with opened(url) as stream:
        yield from group_samples(iter_tar(stream, url), url, rule=rule, handler=handler)


#: the fields the reader adds to every sample (``group_samples``); every other field is data
META = ("__key__", "__url__")


def fields(sample: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The data fields of a sample, ``(extension, bytes)``, without the reader's ``__key__`` and ``__url__``."""
    return ((k, v) for k, v in sample.items() if k not in META)


def dataset_samples(urls: Iterable[str], rule: KeyRule) -> Iterator[dict[str, Any]]:
    """The samples of several shards, one after the other."""
    for url in urls:
        yield from shard_samples(url, rule)


# -- messages and progress -------------------------------------------------------------------------------------


def message(args: argparse.Namespace, text: str) -> None:
    """A summary line on stderr (suppressed by ``--quiet``)."""
    if not getattr(args, "quiet", False):
        print(f"shardstream: {text}", file=sys.stderr)


def progress_enabled(args: argparse.Namespace, stream: Any = None) -> bool:
    """Progress bars are shown only when stderr is a terminal and ``--quiet`` is not given."""
    stream = sys.stderr if stream is None else stream
    if getattr(args, "quiet", False):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """The one progress display of the commands: a tqdm bar on stderr, or nothing (same methods) when progress is
    off (stderr not a terminal, or ``--quiet``). With a known total it shows ``desc: 30%|███| 12/40 shards``;
    without one (streams, ``pipe:``) a counter and a rate. The bar is cleared when done."""

    def __init__(self, args: argparse.Namespace, *, desc: str, unit: str = " samples", total: int | None = None,
                 stream: Any = None):
        stream = sys.stderr if stream is None else stream
        self._bar: Any = None
        if progress_enabled(args, stream):
            from tqdm.auto import tqdm  # noqa: PLC0415 - a heavy import that only a terminal needs

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=stream, leave=False, mininterval=0.1)

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def describe(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(args: argparse.Namespace, iterable: Iterable[Any], *, desc: str, unit: str = " samples",
             total: int | None = None) -> Iterator[Any]:
    """Iterate with a progress bar (see :class:`Progress`)."""
    with Progress(args, desc=desc, unit=unit, total=total) as bar:
        for item in iterable:
            yield item
            bar.update()


def plural(n: int, word: str) -> str:
    """``plural(1, "shard") == "1 shard"``, ``plural(2, "shard") == "2 shards"``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def human(n: float) -> str:
    """A byte count for people: ``1.5 KiB``.

    >>> human(512), human(1536), human(3 << 30)
    ('512 B', '1.5 KiB', '3.0 GiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover
