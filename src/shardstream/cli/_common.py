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
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from ..errors import ConfigError
from ..io import finish_stream, open_url
from ..io.urls import expand_inputs, local_path
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
    "common_parents",
    "dataset_samples",
    "describe",
    "examples",
    "expand_inputs",
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


def common_parents() -> dict[str, argparse.ArgumentParser]:
    """Parent parsers: ``common`` (-q, -v, --debug: also accepted after the subcommand), ``read`` (--key-rule)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress bars and no summary lines on stderr")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error")
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log what the library does on stderr (downloads, shards written...); -vv: debug")
    read = argparse.ArgumentParser(add_help=False)
    read.add_argument("--key-rule", metavar="RULE", default="first-dot",
                      help="how member names split into key and extension: first-dot (WebDataset's rule, "
                           "default), last-dot, or a regular expression with two groups (key, extension)")
    return {"common": common, "read": read}


def describe(doc: str | None) -> str:
    """A module docstring as ``--help`` text: the paragraphs before the first doctest, without reST markup."""
    paragraphs = []
    for paragraph in (doc or "").strip().split("\n\n"):
        if paragraph.lstrip().startswith(">>>"):
            break
        paragraphs.append(paragraph)
    text = re.sub(r":\w+:`~[\w.]*\.([^`]+)`", r"\1", "\n\n".join(paragraphs))
    text = re.sub(r":\w+:`([^`]+)`", r"\1", text)
    return text.replace("``", "'").replace("'-'", "-").replace("::", ":")


def command(sub: Any, parents: dict[str, argparse.ArgumentParser], name: str, summary: str, doc: str | None,
            epilog: str, *, read: bool = True, **options: Any) -> argparse.ArgumentParser:
    """A subcommand's parser: ``summary`` in the command list, the module docstring ``doc`` as its description,
    ``epilog`` (:func:`examples`) after the options, the common options and, with ``read``, the reading ones."""
    uses = [parents["common"], parents["read"]] if read else [parents["common"]]
    return sub.add_parser(name, parents=uses, help=summary, description=describe(doc), epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter, **options)


def add_inputs(p: argparse.ArgumentParser, nargs: str = "+", what: str = "shards") -> None:
    """The positional inputs of a command that reads datasets."""
    p.add_argument("inputs", nargs=nargs, metavar="INPUT", help=f"{what}: paths, URLs, brace patterns, '-' (stdin)")


def examples(*commands: str, note: str = "") -> str:
    """The ``--help`` epilog: example commands, one per line (the test suite runs them)."""
    lines = ["examples:", *(f"  $ {c}" for c in commands)]
    return "\n".join(lines) + (f"\n\n{note}" if note else "")


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
    """A one-line progress display on stderr, or nothing (same methods) when progress is off.

    With a known total: ``desc: 12/40 shards (30%)``; with an unknown total (streams, ``pipe:``): a spinner and a
    counter, ``desc: ⠹ 1234 samples (410/s)``. Redrawn at most every 0.1 s, cleared when done.
    """

    _SPIN = "|/-\\"

    def __init__(self, args: argparse.Namespace, *, desc: str, unit: str = " samples", total: int | None = None,
                 stream: Any = None):
        self._stream = sys.stderr if stream is None else stream
        self._on = progress_enabled(args, self._stream)
        self.desc, self.unit, self.total = desc, unit, total
        self.n = 0
        self._extra = ""
        self._start = self._last = time.monotonic()
        self._drawn = 0
        if self._on:
            self._draw()

    def _draw(self) -> None:
        if self.total:
            text = f"{self.desc}: {self.n}/{self.total}{self.unit} ({100 * self.n // self.total}%)"
        else:
            rate = self.n / max(time.monotonic() - self._start, 1e-6)
            text = f"{self.desc}: {self._SPIN[self._drawn % 4]} {self.n}{self.unit} ({rate:.0f}/s)"
        text += f" {self._extra}" if self._extra else ""
        self._stream.write("\r" + text[:200] + "\x1b[K")
        self._stream.flush()
        self._drawn += 1

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._on:
            now = time.monotonic()
            if now - self._last >= 0.1:
                self._last = now
                self._draw()

    def describe(self, text: str) -> None:
        self._extra = text

    def close(self) -> None:
        if self._on:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._on = False

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
