"""Never overwrite silently: what an output would replace, and how a set of shards is replaced.

:class:`OutputPlan` looks at the output before anything is written:

- one file (``-o out.tar``) that exists is refused unless ``--overwrite``; with it the new file is written under
  a temporary name and renamed over the old one, so a reader sees the old file or the new one, never a mix;
- a shard pattern (``-o 'out-%06d.tar'``) whose directory already holds shards of that pattern (any number) is
  refused unless ``--overwrite``. With it the whole old set is replaced: the new shards are written under
  temporary names (``.out-000000.tar.<token>.partial``, hidden from globs such as ``out-*.tar``), then renamed
  to their final names one by one, then the old shards that the new set does not replace are removed.

What a concurrent reader may see while a set is replaced: every shard it opens is complete (old or new, never a
partial file: each rename is atomic). During the short rename phase a listing may mix new shards with old ones,
and a reader that listed the old set before the last step may find an old shard gone (``FileNotFoundError``).
Once the command has exited, only the new set is there. Write to a new directory and switch a symbolic link
when readers must never see a mix.

Remote outputs (``s3://...``) are not checked: the object store has no cheap listing here.

>>> import os
>>> _ = open("old-000000.tar", "w"), open("old-000001.tar", "w"), open("old-000002.tar", "w")
>>> plan = OutputPlan("old-%06d.tar", overwrite=True)
>>> plan.existing, plan.write_pattern.startswith(".old-%06d.tar.")
(['old-000000.tar', 'old-000001.tar', 'old-000002.tar'], True)
>>> _ = open(shard_name(plan.write_pattern, 0), "w")
>>> plan.commit(1), sorted(n for n in os.listdir(".") if n.startswith("old"))
((['old-000000.tar'], ['old-000001.tar', 'old-000002.tar']), ['old-000000.tar'])
"""

from __future__ import annotations

import os
import re
import secrets

from ..errors import ConfigError
from ._common import local_path

__all__ = ["OutputPlan", "is_pattern", "pattern_regex", "shard_name"]

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


def existing_shards(pattern: str) -> list[str]:
    """The files in the pattern's directory whose names match it (sorted)."""
    directory = os.path.dirname(pattern) or "."
    regex = pattern_regex(os.path.basename(pattern))
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    prefix = os.path.dirname(pattern)
    return sorted(os.path.join(prefix, n) if prefix else n for n in names if regex.match(n))


class OutputPlan:
    """Check an output before writing (see the module docstring) and replace the old one afterwards.

    :param target: the ``-o`` argument: a file, ``-``, or a shard pattern
    :param overwrite: whether existing outputs may be replaced (else :class:`ConfigError` naming the file)
    """

    def __init__(self, target: str, *, overwrite: bool = False):
        self.target = target
        self.sharded = is_pattern(target)
        path = None if target == "-" else local_path(target)
        self.local = path is not None
        if self.sharded:
            self.existing = existing_shards(target) if self.local else []
        else:
            self.existing = [target] if self.local and os.path.lexists(target) else []
        if self.existing and not overwrite:
            raise ConfigError(self._refusal())
        self.token = secrets.token_hex(4)
        #: the pattern the shards are written under (temporary names when an old set is replaced)
        self.write_pattern = target
        if self.sharded and self.existing:
            directory, base = os.path.split(target)
            self.write_pattern = os.path.join(directory, f".{base}.{self.token}.partial")

    def _refusal(self) -> str:
        if not self.sharded:
            return f"the output {self.target!r} exists; pass --overwrite to replace it"
        more = f" and {len(self.existing) - 1} more" if len(self.existing) > 1 else ""
        return (f"the shard pattern {self.target!r} already has shards ({self.existing[0]!r}{more}); writing "
                "among them would mix two datasets: pass --overwrite to replace the whole old set, or write elsewhere")

    def final_names(self, count: int) -> list[str]:
        """The final names of the first ``count`` shards."""
        return [shard_name(self.target, k) for k in range(count)]

    def commit(self, count: int) -> tuple[list[str], list[str]]:
        """After ``count`` shards were written under :attr:`write_pattern`: rename them into place and remove the
        old shards the new set does not replace. ``(final names, removed names)``."""
        finals = self.final_names(count)
        if self.write_pattern != self.target:
            for k, final in enumerate(finals):
                os.replace(shard_name(self.write_pattern, k), final)
        keep = {os.path.realpath(p) for p in finals}
        removed = [p for p in self.existing if os.path.realpath(p) not in keep]
        for p in removed:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        return finals, removed

    def discard(self, count: int) -> None:
        """After a failure: remove the temporary shards written so far (the old set stays untouched)."""
        if self.write_pattern == self.target:
            return
        for k in range(count):
            try:
                os.unlink(shard_name(self.write_pattern, k))
            except FileNotFoundError:
                pass

    def would_remove(self, count: int) -> list[str]:
        """The old shards a set of ``count`` new ones would remove (for ``--dry-run``)."""
        keep = {os.path.realpath(p) for p in self.final_names(count)} if self.sharded else {os.path.realpath(self.target)}
        return [p for p in self.existing if os.path.realpath(p) not in keep]
