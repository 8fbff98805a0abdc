"""The ``shardstream`` command line: create, convert, concatenate, split, shuffle, inspect, verify and extract
datasets.

One entry point (``shardstream``, or ``python -m shardstream``) with subcommands, one module each;
``shardstream --help`` lists them and ``shardstream COMMAND --help`` shows a command's options and examples
(docs/cli.md has them all). The commands share one vocabulary: ``-o/--output`` for every output,
``-j/--workers`` for processes, ``--overwrite`` to replace outputs, ``--redo`` to recompute finished tasks,
``--dry-run`` and ``--json`` on every command that writes.

Every command that reads shards takes the same INPUTs: local paths, directories of shards, globs, brace patterns
(``'train-{000..009}.tar'``), dataset specs (``.yaml``), dataset indexes (``.json``), ``-`` (standard input),
``pipe:CMD`` and every URL scheme registered with :mod:`shardstream.io`.

Exit codes, stable for scripts:

    0    success
    1    problems found (``verify``; ``extract`` when it refused names or existing files)
    2    usage error: bad arguments or options
    3    data or I/O error: a shard that cannot be opened, read, parsed or written; a missing dependency
    130  interrupted (Ctrl-C)
    141  standard output was closed by its reader (e.g. ``| head``)

Errors are one line on stderr, ``shardstream: error: <message>``; ``--debug`` adds the traceback. Results go to
stdout; diagnostics (errors, warnings, and with ``-v`` what the library does: downloads, evictions, shards
written) go through :mod:`logging` (the ``shardstream`` logger) to stderr. ``-v`` shows INFO records, ``-vv``
and ``--debug`` DEBUG ones (``SHARDSTREAM_VERBOSE=1`` counts as ``-v``); ``-q`` drops the summary lines.

>>> main(["--version"])  # doctest: +ELLIPSIS
shardstream ...
0
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn, TextIO

from .. import __version__
from ..config import Settings
from ..errors import ConfigError, ShardstreamError
from ..redact import SecretFilter, redacted_stdio, redacting_logger
from . import cache, cat, convert, create, extract, index, info, map, shuffle, sort, split, verify, view
from ._common import EXIT_DATA, EXIT_USAGE, CommandError
from ._options import HelpFormatter, common_parents, compact_usage, describe

__all__ = ["build_parser", "main"]

#: the modules that register subcommands, in the order of ``--help``
COMMANDS = (create, convert, map, cat, split, shuffle, sort, info, verify, extract, index, cache, view)

log = redacting_logger(__name__)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``shardstream: error: <message> (see 'shardstream cmd --help')``."""

    def error(self, message: str) -> NoReturn:
        log.error("%s (see '%s --help')", message, self.prog)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``shardstream`` command, with every subcommand registered."""
    parser = _Parser(
        prog="shardstream",
        description=describe(__doc__),
        epilog="Run 'shardstream COMMAND --help' for the options and examples of a command.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"shardstream {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars and no summary lines")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log what the library does on stderr (downloads, shards written...); -vv: debug")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    parents = common_parents()
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub, parents)
    for command in set(sub.choices.values()):
        command.usage = command.usage or compact_usage(command)
    return parser


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and not isinstance(e, ShardstreamError) and e.strerror:
        text = f"{e.strerror}: {e.filename!r}" if e.filename else e.strerror
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split())


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    log.warning("%s", " ".join(str(message).split()))


def _fail(args: argparse.Namespace, e: BaseException, code: int, prefix: str = "") -> int:
    debug = getattr(args, "debug", False)
    hint = " (run with --debug for the traceback)" if prefix and not debug else ""
    log.error("%s%s%s", prefix, _one_line(e), hint, exc_info=e if debug else None)
    return code


class _Format(logging.Formatter):
    """``shardstream: <message>`` at INFO, ``shardstream: warning: <message>`` (error, debug...) otherwise."""

    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
        return f"shardstream: {level}{super().format(record)}"


@contextlib.contextmanager
def _logging() -> Iterator[Callable[[argparse.Namespace], None]]:
    """For the duration of one command: the ``shardstream`` logger writes to stderr only, through the CLI's
    format, at WARNING until :func:`configure` applies -v/-vv/--debug; everything is restored afterwards."""
    logger = logging.getLogger("shardstream")
    saved = logger.level, logger.propagate, logger.handlers[:]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format())
    handler.addFilter(SecretFilter())  # records of any shardstream logger, however it was made
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.WARNING)

    def configure(args: argparse.Namespace) -> None:
        verbosity = args.verbose
        with contextlib.suppress(ConfigError):  # a malformed environment is reported by the setting's user
            verbosity = max(verbosity, int(Settings.from_env().verbose))
        if getattr(args, "debug", False):
            verbosity = 2
        logger.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))

    try:
        yield configure
    finally:
        logger.setLevel(saved[0])
        logger.propagate, logger.handlers = saved[1], saved[2]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``shardstream`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    with redacted_stdio(), _logging() as configure:  # no secret in anything the command prints
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version, usage errors
            return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
        configure(args)
        return _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.run(args) or 0)
    except CommandError as e:
        return _fail(args, e, e.code)
    except ConfigError as e:
        return _fail(args, e, EXIT_USAGE)
    except (ShardstreamError, OSError) as e:
        if isinstance(e, BrokenPipeError) or getattr(e, "errno", None) == errno.EPIPE:
            return _broken_pipe()
        return _fail(args, e, EXIT_DATA)
    except KeyboardInterrupt:
        log.warning("interrupted")
        return 130
    except Exception as e:  # a bug: still one line, unless --debug
        return _fail(args, e, EXIT_DATA, prefix=f"unexpected {type(e).__name__}: ")


def _broken_pipe() -> int:
    """The reader of stdout went away (``| head``): exit quietly, without a second error at interpreter exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 141
