"""Where the commands that write put their samples: one tar file, standard output, or numbered shards.

``-o out.tar`` writes one tar file, ``-o -`` writes one tar to standard output (never to a terminal), and a
pattern with a shard number (``-o 'out/train-%06d.tar'`` or ``-o 'out/train-{shard:06d}.tar'``) writes shards
with :class:`~shardstream.writer.ShardWriter` (``--maxcount``, ``--maxsize``). Field bytes are written as they
are (``encoder=False``): nothing is decoded or re-encoded, and every field is kept, also those whose names
start with ``_`` (only the reader's ``__url__`` is dropped). Output is deterministic (mtime 0, fixed owner and
mode, fields of a sample in sorted order) and all-or-nothing per file (temporary name, renamed when complete).

An existing output is never replaced silently: see :mod:`shardstream.cli._replace` (``--overwrite`` replaces a
file, or a whole set of shards). ``--dry-run`` reads the input and computes exactly what would be written
(shards, samples, bytes) through a counting sink, and writes nothing. ``--json`` prints the result as one JSON
document on stdout.

Two samples with the same key in one output shard would be read back as one broken sample, so repeated keys
are refused by default (``--duplicate-keys error``); ``rename`` appends ``_1``, ``_2``... to the repeats, and
``allow`` writes them as they are (like ``tarscat``).

>>> shard_name("out-%06d.tar", 3), shard_name("out-{shard:04d}.tar", 3), is_pattern("out.tar")
('out-000003.tar', 'out-0003.tar', False)
>>> bool(pattern_regex("/d/out-%06d.tar").match("/d/out-000012.tar"))
True
>>> with SampleOutput("counted-%02d.tar", maxcount=2, dry_run=True) as out:
...     for i in range(3):
...         out.write({"__key__": str(i), "txt": b"x"})
>>> [(s["path"], s["samples"], s["bytes"]) for s in out.result()["shards"]], os.path.exists("counted-00.tar")
([('counted-00.tar', 2, 10240), ('counted-01.tar', 1, 10240)], False)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError, EncodeError
from ..writer import ShardWriter, TarWriter
from ._common import CommandError, local_path, message, parse_size, plural, positive_int
from ._options import add_options
from ._replace import OutputPlan, is_pattern, pattern_regex, shard_name

__all__ = ["DUPLICATE_POLICIES", "MIN_MAXSIZE", "SampleOutput", "add_output_options", "finish", "is_pattern",
           "output_options", "pattern_regex", "shard_name"]

DUPLICATE_POLICIES = ("error", "rename", "allow")
#: the smallest --maxsize: one tar record (a shard with one sample and the end of archive is at least this)
MIN_MAXSIZE = 10240


def _maxsize(text: str) -> int:
    size = parse_size(text)
    if size < MIN_MAXSIZE:
        raise argparse.ArgumentTypeError(
            f"--maxsize {text} is below the tar record size ({MIN_MAXSIZE} bytes = 10K): every shard is at least "
            "that large; give e.g. 64K or 500M")
    return size


def add_output_options(parser: Any, *, sizes: bool = True, workers: str | None = None) -> None:
    """The options of a command that writes samples (:func:`~shardstream.cli._options.add_options`): ``-o``,
    ``--maxcount``, ``--maxsize``, ``--duplicate-keys``, ``--overwrite``, ``--dry-run``, ``--json`` and, with
    ``workers`` (its help text), ``-j``."""
    add_options(parser, output="one tar file, - for standard output, or a shard pattern such as "
                               "'out/train-%%06d.tar' (directories are created)",
                overwrite="replace an existing output file, or the whole existing set of shards of the pattern",
                dry_run="read the input and report what would be written (shards, samples, bytes); write nothing",
                json="print the result as one JSON document on stdout",
                workers=workers)
    if sizes:
        parser.add_argument("--maxcount", type=positive_int, metavar="N", help="at most N samples per shard")
        parser.add_argument("--maxsize", type=_maxsize, metavar="SIZE",
                            help="at most SIZE bytes per shard (e.g. 500M, 1G; at least 10K), end of archive included")
    parser.add_argument("--duplicate-keys", choices=DUPLICATE_POLICIES, default="error",
                        help="a key repeated within one output shard: error (default), rename (key_1, key_2...) "
                             "or allow (write it anyway)")


class _CountingSink:
    """A stream that counts and discards (``--dry-run``)."""

    name = "<dry run>"

    def __init__(self, path: str = "<dry run>"):
        self.name, self.written = path, 0

    def write(self, data: Any) -> int:
        self.written += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class SampleOutput:
    """Write raw samples (``{"__key__": ..., ext: bytes}``) to ``target`` (see the module docstring).

    ``inputs``: the input URLs, so that an output that would overwrite one of them is refused.
    ``plan``/``write_as``: for a caller that writes several single files of one pattern (``split -n``): the
    pattern's :class:`~shardstream.cli._replace.OutputPlan` (checked and committed by the caller) and the name
    to write this file under.
    """

    def __init__(self, target: str, *, maxcount: int | None = None, maxsize: int | None = None,
                 duplicates: str = "error", inputs: Iterable[str] = (), overwrite: bool = False,
                 dry_run: bool = False, plan: OutputPlan | None = None, write_as: str | None = None):
        self.target, self.duplicates, self.dry_run = target, duplicates, dry_run
        self.sharded = is_pattern(target)
        if not self.sharded and (maxcount or maxsize):
            raise ConfigError(f"--maxcount/--maxsize need a shard pattern as output, e.g. -o 'out-%06d.tar' "
                              f"(got {target!r})")
        first = shard_name(target, 0) if self.sharded else target
        if self.sharded and first == shard_name(target, 1):
            raise ConfigError(f"shard pattern {target!r} gives every shard the same name")
        self._owns_plan = plan is None and target != "-"
        if target == "-":
            if sys.stdout.isatty() and not dry_run:
                raise ConfigError("refusing to write a tar archive to a terminal; redirect or pipe it")
        else:
            self._refuse_inputs(first, inputs)
            if plan is None:
                plan = OutputPlan(target, overwrite=overwrite)
            if not dry_run:
                os.makedirs(os.path.dirname(first) or ".", exist_ok=True)
        self.plan = plan
        self._keys: set[str] = set()
        self.renamed = 0
        self.total = 0
        self._maxcount = maxcount
        self.removed: list[str] = []
        self.shards: list[str] = []
        self._info: list[dict[str, Any]] = []
        sink: Any = _CountingSink if dry_run else None
        if self.sharded:
            pattern = plan.write_pattern if plan is not None and not dry_run else target
            self.writer: Any = ShardWriter(pattern, maxcount=maxcount or 100000, maxsize=maxsize or 3e9,
                                           encoder=False, keep_meta=True, opener=sink)
        else:
            name = write_as or target
            self.writer = TarWriter(_CountingSink(name) if dry_run else name, encoder=False, keep_meta=True)

    def _refuse_inputs(self, first: str, inputs: Iterable[str]) -> None:
        paths = {os.path.realpath(p) for p in map(local_path, inputs) if p}
        if not paths:
            return
        directory = os.path.realpath(os.path.dirname(first) or ".")
        if self.sharded:
            regex = pattern_regex(os.path.join(directory, os.path.basename(self.target)))
            clash = sorted(p for p in paths if regex.match(p))
        else:
            clash = sorted(paths & {os.path.join(directory, os.path.basename(first))})
        if clash:
            raise ConfigError(f"the output {self.target!r} would overwrite the input {clash[0]!r}; write elsewhere")

    @property
    def current(self) -> str:
        """The name of the file being written (its final name)."""
        return shard_name(self.target, self.writer.shard) if self.sharded else self.target

    def write(self, sample: dict[str, Any]) -> None:
        """Write one sample (its ``__key__`` is checked against the keys of the current output shard).

        ``error``: the check is made once the writer has placed the sample, so a key that only repeats one of
        the previous shard is never refused. ``rename``: the check is made before (the new key must be known
        before writing), so a repeat that lands first in a new ``--maxsize`` shard may be renamed needlessly.
        """
        if "__url__" in sample:  # the reader's note of where the sample came from; any other field is data
            sample = {k: v for k, v in sample.items() if k != "__url__"}
        if self.duplicates == "allow":
            self.writer.write(sample)
            self.total += 1
            return
        key = sample["__key__"]
        if self.sharded and self._maxcount and self.writer.count >= self._maxcount:
            self._keys.clear()  # this sample starts a new shard
        repeat = key in self._keys
        if repeat and self.duplicates == "rename":
            n = 1
            while f"{key}_{n}" in self._keys:
                n += 1
            key = f"{key}_{n}"
            sample = {**sample, "__key__": key}
            self.renamed += 1
            repeat = False
        try:
            self.writer.write(sample)
        except EncodeError:
            if repeat:  # the writer refuses a key equal to the previous one: say why it matters
                raise self._repeated(sample) from None
            raise
        if self.sharded and self.writer.count == 1:
            self._keys.clear()  # the sample went into a new shard: no repeat
        elif repeat:
            raise self._repeated(sample)
        self._keys.add(key)
        self.total += 1

    def _repeated(self, sample: dict[str, Any]) -> CommandError:
        return CommandError(
            f"key {sample['__key__']!r} (from {sample.get('__url__') or 'the input'}) appears twice in the output "
            f"{self.current!r}; two samples with one key would be read back as one broken sample; pass "
            "--duplicate-keys rename to rename the repeats (or allow to write them anyway)"
        )

    def close(self) -> list[str]:
        """Finish writing (and, when this output owns its plan, replace the old output); the files written."""
        self.writer.close()
        if self.sharded:
            count = len(self.writer.shard_info)
            finals = self.plan.final_names(count) if self.plan is not None else list(self.writer.shards)
            self._info = [{"path": final, "samples": info.samples, "bytes": info.bytes}
                          for final, info in zip(finals, self.writer.shard_info, strict=False)]
            if self.dry_run:
                self.removed = self.plan.would_remove(count) if self.plan is not None else []
            elif self._owns_plan and self.plan is not None:  # an owned plan is never None
                finals, self.removed = self.plan.commit(count)
            self.shards = finals
        else:
            size = self.writer.bytes_written
            if self.target != "-":
                self.shards = [self.target]
            self._info = [{"path": self.target, "samples": self.total, "bytes": size}]
        return self.shards

    def abort(self) -> None:
        """Give up: the file in progress is removed; an old set being replaced stays as it was."""
        self.writer.abort()
        if self.sharded and self._owns_plan and self.plan is not None and not self.dry_run:
            self.plan.discard(len(self.writer.shard_info))

    def result(self) -> dict[str, Any]:
        """What was (or with ``dry_run``, would be) written, for ``--json``."""
        return {"output": self.target, "dry_run": self.dry_run, "samples": self.total, "shards": self._info,
                "replaced": self.removed if self.sharded else list(self.plan.existing if self.plan else []),
                "renamed_keys": self.renamed}

    def summary(self) -> str:
        """One line for stderr: what was written."""
        where = "standard output" if self.target == "-" else (
            f"{plural(len(self.shards), 'shard')} ({self.target})" if self.sharded else self.target
        )
        extra = f"; renamed {plural(self.renamed, 'repeated key')}" if self.renamed else ""
        replaced = self.result()["replaced"]
        if replaced:
            extra += f"; {'would replace' if self.dry_run else 'replaced'} {plural(len(replaced), 'old file')}"
        verb = "dry run: would write" if self.dry_run else "wrote"
        size = sum(s["bytes"] for s in self._info)
        return f"{verb} {plural(self.total, 'sample')} ({size} bytes) to {where}{extra}"

    def __enter__(self) -> SampleOutput:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def output_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :class:`SampleOutput` from the options of :func:`add_output_options`."""
    if getattr(args, "json", False) and args.output == "-" and not args.dry_run:
        raise ConfigError("--json prints on standard output, where -o - writes the tar; write to a file instead")
    return {"maxcount": getattr(args, "maxcount", None), "maxsize": getattr(args, "maxsize", None),
            "duplicates": args.duplicate_keys, "overwrite": args.overwrite, "dry_run": args.dry_run}


def finish(args: argparse.Namespace, command: str, result: dict[str, Any], line: str) -> int:
    """Report a writing command's result: JSON on stdout with ``--json``, else the summary line on stderr."""
    if getattr(args, "json", False):
        json.dump({"command": command, **result}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        sys.stdout.flush()
    else:
        message(args, line)
    return 0
