"""The one option builder of the subcommands: every command spells its shared options the same way.

=================  ======================================================================================
``-o/--output``    every output: a tar file, a shard pattern, a directory (``convert``, ``map``, ``extract``)
                   or the dataset index (``index``)
``-j/--workers``   processes, in every command that works in parallel
``--overwrite``    replace existing outputs (without it an existing output is refused, or kept when fresh)
``--redo``         recompute the tasks an earlier run completed (``convert``, ``map``: they resume)
``--dry-run``      say what would be written; write nothing
``--json``         the result as JSON on stdout
INPUT              any source :func:`~shardstream.cli._inputs.resolve_inputs` resolves
=================  ======================================================================================

:func:`add_options` adds them (each command gives its own help text); :func:`command` makes a subcommand's parser.
Old spellings keep working for one release, hidden from ``--help``, with a warning that names the new one
(:func:`add_old_spelling`, :func:`output_or_last`).

>>> import argparse
>>> p = argparse.ArgumentParser(prog="demo")
>>> add_options(p, output="the tar file", workers="processes", overwrite="replace it", dry_run="write nothing",
...             json="JSON on stdout")
>>> args = p.parse_args(["-o", "x.tar", "-j", "2", "--dry-run"])
>>> args.output, args.workers, args.overwrite, args.dry_run, args.json
('x.tar', 2, False, True, False)
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from ..redact import redacting_logger
from ._common import EXIT_USAGE, CommandError, positive_int
from ._inputs import INPUT_HELP

__all__ = ["SPELLINGS", "HelpFormatter", "add_inputs", "add_old_spelling", "add_options", "command", "common_parents", "compact_usage", "describe",
           "examples", "output_or_last"]

log = redacting_logger("shardstream.cli")

#: option name -> its spellings and argparse settings: the one place each shared option is spelt
SPELLINGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "output": (("-o", "--output"), {"metavar": "OUT"}),
    "workers": (("-j", "--workers"), {"type": positive_int, "metavar": "N"}),
    "overwrite": (("--overwrite",), {"action": "store_true"}),
    "redo": (("--redo",), {"action": "store_true"}),
    "dry_run": (("--dry-run",), {"action": "store_true"}),
    "json": (("--json",), {"action": "store_true"}),
}


def add_options(p: Any, *, required_output: bool = True, output_metavar: str = "OUT", workers_default: Any = 1,
                **helps: str | None) -> None:
    """Add the shared options named in ``helps`` (``output``, ``workers``, ``overwrite``, ``redo``, ``dry_run``,
    ``json``), each with its help text (None: not this one), in the order of :data:`SPELLINGS`."""
    unknown = set(helps) - set(SPELLINGS)
    if unknown:
        raise ValueError(f"no shared option {sorted(unknown)}; known: {sorted(SPELLINGS)}")
    for name, (flags, settings) in SPELLINGS.items():
        if helps.get(name) is None:
            continue
        extra: dict[str, Any] = {}
        if name == "output":
            extra = {"required": required_output, "metavar": output_metavar}
        elif name == "workers":
            extra = {"default": workers_default}
        p.add_argument(*flags, dest=name, help=helps[name], **{**settings, **extra})


class _OldSpelling(argparse.Action):
    """An old spelling of an option: does what the new one does, and says so on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        log.warning("%s: %s is deprecated, write %s (the old spelling goes in a future release)", parser.prog,
                    option_string, self.new)
        setattr(namespace, self.dest, True if self.nargs == 0 else values)


def add_old_spelling(p: Any, *flags: str, dest: str, new: str, flag: bool = False, metavar: str | None = None
                     ) -> None:
    """Accept ``flags`` as an old spelling of the option stored in ``dest`` (``new`` is how to write it now);
    hidden from ``--help``. ``flag``: an option without a value (``--rebuild`` for ``--overwrite``)."""
    p.add_argument(*flags, dest=dest, action=_OldSpelling, new=new, nargs=0 if flag else None, metavar=metavar,
                   default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def output_or_last(args: argparse.Namespace, attr: str, command: str) -> tuple[list[str], str]:
    """``(sources, output)`` of a command that took its output as the last positional argument (``SOURCE...
    DEST``): ``-o DEST`` wins; without it the last argument is the output, with a warning naming ``-o``."""
    sources = list(getattr(args, attr))
    if args.output is not None:
        return sources, args.output
    if len(sources) < 2:
        raise CommandError(f"give the output: shardstream {command} SOURCE... -o DEST", EXIT_USAGE)
    *sources, dest = sources
    log.warning("shardstream %s: the output as the last argument (%s) is deprecated, write -o %s (the old form "
                "goes in a future release)", command, dest, dest)
    return sources, dest


# -- parsers ---------------------------------------------------------------------------------------------------


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every ``--help``: the descriptions as written, 100 columns whatever the terminal (docs/cli.md is the same
    text), and room for ``split (reshard)`` beside its summary in the command list."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=26, width=100)

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):  # argparse measures the commands without their indent
            self._action_max_length += self._indent_increment


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


def _literal(match: re.Match[str]) -> str:
    text = match.group(1)
    if text == "-" or (len(text) > 1 and text[0] == text[-1] and text[0] in "'\""):
        return text  # already quoted (a shell argument), or '-'
    return f'"{text}"' if "'" in text else f"'{text}'"


def describe(doc: str | None) -> str:
    """A module docstring as ``--help`` text: the paragraphs before the first doctest, without reST markup.

    >>> print(describe("Read ``'a-{0..9}.tar'`` or ``-`` with ``-o 'x-%06d.tar'``; see :mod:`shardstream.io`."))
    Read 'a-{0..9}.tar' or - with "-o 'x-%06d.tar'"; see shardstream.io.
    """
    paragraphs = []
    for paragraph in (doc or "").strip().split("\n\n"):
        if paragraph.lstrip().startswith(">>>"):
            break
        paragraphs.append(paragraph)
    text = re.sub(r":\w+:`~[\w.]*\.([^`]+)`", r"\1", "\n\n".join(paragraphs))
    text = re.sub(r":\w+:`([^`]+)`", r"\1", text)
    text = re.sub(r"``(.+?)``", _literal, text, flags=re.S)
    return text.replace("::", ":")


def command(sub: Any, parents: dict[str, argparse.ArgumentParser], name: str, summary: str, doc: str | None,
            epilog: str, *, read: bool = True, **options: Any) -> argparse.ArgumentParser:
    """A subcommand's parser: ``summary`` in the command list, the module docstring ``doc`` as its description,
    ``epilog`` (:func:`examples`) after the options, the common options and, with ``read``, the reading ones."""
    uses = [parents["common"], parents["read"]] if read else [parents["common"]]
    return sub.add_parser(name, parents=uses, help=summary, description=describe(doc), epilog=epilog,
                          formatter_class=HelpFormatter, **options)


def _shown(action: argparse.Action) -> str:
    meta = action.metavar if action.metavar is not None else action.dest.upper()
    if action.choices is not None and action.metavar is None:
        meta = "{" + ",".join(map(str, action.choices)) + "}"
    if not action.option_strings:
        return {"+": f"{meta} [{meta} ...]", "*": f"[{meta} ...]", "?": f"[{meta}]"}.get(str(action.nargs), str(meta))
    return f"{action.option_strings[0]} {meta}"


def compact_usage(parser: argparse.ArgumentParser) -> str:
    """A usage line that shows what the command takes: ``%(prog)s`` and its arguments, its required options, then
    ``[options]`` (the full list follows in --help).

    >>> p = argparse.ArgumentParser(prog="shardstream demo")
    >>> _ = p.add_argument("inputs", nargs="+", metavar="INPUT"); _ = p.add_argument("-o", required=True, metavar="OUT")
    >>> compact_usage(p)
    '%(prog)s INPUT [INPUT ...] -o OUT [options]'
    """
    actions = [a for a in parser._actions if a.help != argparse.SUPPRESS]
    parts = ["%(prog)s", *(_shown(a) for a in actions if not a.option_strings)]
    parts += [_shown(a) for a in actions if a.option_strings and a.required]
    return " ".join([*parts, "[options]"])


def add_inputs(p: argparse.ArgumentParser, nargs: str = "+", metavar: str = "INPUT") -> None:
    """The positional inputs of a command that reads datasets (resolved by
    :func:`~shardstream.cli._inputs.resolve_inputs`)."""
    p.add_argument("inputs", nargs=nargs, metavar=metavar, help=INPUT_HELP)


def examples(*commands: str, note: str = "") -> str:
    """The ``--help`` epilog: example commands, one per line (the test suite runs them)."""
    lines = ["examples:", *(f"  $ {c}" for c in commands)]
    return "\n".join(lines) + (f"\n\n{note}" if note else "")
