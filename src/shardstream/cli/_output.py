"""Where the commands that write put their samples: one tar file, standard output, or numbered shards.

``-o out.tar`` writes one tar file, ``-o -`` writes one tar to standard output (never to a terminal), and a
pattern with a shard number (``-o 'out/train-%06d.tar'`` or ``-o 'out/train-{shard:06d}.tar'``) writes shards
with :class:`~shardstream.writer.ShardWriter` (``--maxcount``, ``--maxsize``). Field bytes are written as they
are (``encoder=False``): nothing is decoded or re-encoded, and every field is kept, also those whose names
start with ``_`` (only the reader's ``__url__`` is dropped). Output is deterministic (mtime 0, fixed owner and
mode, fields of a sample in sorted order) and all-or-nothing per file (temporary name, renamed when complete).

Two samples with the same key in one output shard would be read back as one broken sample, so repeated keys
are refused by default (``--duplicate-keys error``); ``rename`` appends ``_1``, ``_2``... to the repeats, and
``allow`` writes them as they are (like ``tarscat``).

>>> shard_name("out-%06d.tar", 3), shard_name("out-{shard:04d}.tar", 3), is_pattern("out.tar")
('out-000003.tar', 'out-0003.tar', False)
>>> bool(pattern_regex("/d/out-%06d.tar").match("/d/out-000012.tar"))
True
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError, EncodeError
from ..writer import ShardWriter, TarWriter
from ._common import CommandError, local_path, plural

__all__ = ["DUPLICATE_POLICIES", "SampleOutput", "add_output_options", "is_pattern", "pattern_regex", "shard_name"]

DUPLICATE_POLICIES = ("error", "rename", "allow")
_NUMBER = re.compile(r"%[-+ #0]*\d*d|\{[^{}]*\}")


def is_pattern(target: str) -> bool:
    """Whether ``-o`` names numbered shards (it contains a ``%d`` or ``{...}`` shard number)."""
    return _NUMBER.search(target) is not None


def shard_name(pattern: str, shard: int) -> str:
    """The name of shard number ``shard`` of ``pattern`` (``%`` or ``{}`` formatting, as ShardWriter)."""
    try:
        return pattern % shard if "%" in pattern else pattern.format(shard, shard=shard)
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise ConfigError(f"bad shard pattern {pattern!r}: {e}; use e.g. 'out-%06d.tar'") from e


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regular expression matching every name of ``pattern`` (the shard number as digits)."""
    return re.compile(r"\d+".join(map(re.escape, _NUMBER.split(pattern))) + r"\Z")


def add_output_options(parser: Any, *, sizes: bool = True) -> None:
    """``-o``, ``--maxcount``, ``--maxsize`` and ``--duplicate-keys``."""
    from ._common import parse_size, positive_int

    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="one tar file, '-' for standard output, or a shard pattern such as "
                             "'out/train-%%06d.tar' (directories are created)")
    if sizes:
        parser.add_argument("--maxcount", type=positive_int, metavar="N", help="at most N samples per shard")
        parser.add_argument("--maxsize", type=parse_size, metavar="SIZE",
                            help="at most SIZE bytes per shard (e.g. 500M, 1G), end of archive included")
    parser.add_argument("--duplicate-keys", choices=DUPLICATE_POLICIES, default="error",
                        help="a key repeated within one output shard: error (default), rename (key_1, key_2...) "
                             "or allow (write it anyway)")


class SampleOutput:
    """Write raw samples (``{"__key__": ..., ext: bytes}``) to ``target`` (see the module docstring).

    ``inputs``: the input URLs, so that an output that would overwrite one of them is refused.
    """

    def __init__(self, target: str, *, maxcount: int | None = None, maxsize: int | None = None,
                 duplicates: str = "error", inputs: Iterable[str] = ()):
        self.target, self.duplicates = target, duplicates
        self.sharded = is_pattern(target)
        if not self.sharded and (maxcount or maxsize):
            raise ConfigError(f"--maxcount/--maxsize need a shard pattern as output, e.g. -o 'out-%06d.tar' "
                              f"(got {target!r})")
        first = shard_name(target, 0) if self.sharded else target
        if self.sharded and first == shard_name(target, 1):
            raise ConfigError(f"shard pattern {target!r} gives every shard the same name")
        if target == "-":
            if sys.stdout.isatty():
                raise ConfigError("refusing to write a tar archive to a terminal; redirect or pipe it")
        else:
            self._refuse_inputs(first, inputs)
            os.makedirs(os.path.dirname(first) or ".", exist_ok=True)
        self._keys: set[str] = set()
        self.renamed = 0
        self.total = 0
        self._maxcount = maxcount
        if self.sharded:
            self.writer: Any = ShardWriter(target, maxcount=maxcount or 100000, maxsize=maxsize or 3e9,
                                           encoder=False, keep_meta=True)
        else:
            self.writer = TarWriter(target, encoder=False, keep_meta=True)
        self.shards: list[str] = []

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
        """The name of the file being written."""
        return (self.writer.fname or shard_name(self.target, self.writer.shard)) if self.sharded else self.target

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
        """Finish writing; the list of files written."""
        self.writer.close()
        if self.sharded:
            self.shards = list(self.writer.shards)
        elif self.target != "-":
            self.shards = [self.target]
        return self.shards

    def abort(self) -> None:
        """Give up: the file in progress is removed (finished shards stay)."""
        self.writer.abort()

    def summary(self) -> str:
        """One line for stderr: what was written."""
        where = "standard output" if self.target == "-" else (
            f"{plural(len(self.shards), 'shard')} ({self.target})" if self.sharded else self.target
        )
        extra = f"; renamed {plural(self.renamed, 'repeated key')}" if self.renamed else ""
        return f"wrote {plural(self.total, 'sample')} to {where}{extra}"

    def __enter__(self) -> SampleOutput:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
