"""``shardstream verify``: check a dataset and report every problem with its shard, member and offset.

Checked, per shard: every header parses and the archive ends properly (a truncated shard is a problem); member
names are safe to extract (no absolute paths, no ``..``); keys are contiguous (no interleaved samples); no
member lacks an extension; no sample has the same extension twice; every field decodes by its extension with
the codec table (images are decoded fully; ``.gz`` is unwrapped). Fields whose extension has no codec are
counted as "not checked (unknown extension)". Unsafe extensions (``.pyd``, ``.pickle``: decoding them would run
code from the data) are "not checked (unsafe)" unless ``--allow-unsafe``. When a shard has an index beside it
(built by ``shardstream index``), the index must be fresh (match the shard); ``--no-index`` skips that check.

A problem inside a sample does not stop the shard: the sample is skipped and checking goes on. A broken header
stops that shard (what follows cannot be located) and checking goes on with the next shard. Each problem is one
line on stdout: ``SHARD: offset N, member 'NAME', sample 'KEY': what is wrong`` (the offset is the byte offset
of the member's data in the uncompressed tar). ``-j N`` checks N shards at a time in separate processes; the
report is the same, in the same order. Exit status: 0 when no problem was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from ..codecs import decode_field, get_codec
from ..errors import (
    DecodeError,
    MissingDependencyError,
    OpenError,
    SampleFormatError,
    TarFormatError,
    UnsafeDecodeError,
)
from ..samples import KeyRule, group_samples
from ..tar import TruncatedTarWarning, iter_tar
from ._common import (
    EXIT_PROBLEMS,
    fields,
    key_rule,
    opened,
    plural,
    progress,
)
from ._inputs import resolve_inputs
from ._options import add_inputs, add_options, command, examples
from ._parallel import ordered_map
from .index import index_problems

__all__ = ["Problem", "ShardReport", "register", "run", "verify_shard"]

EXAMPLES = examples(
    "shardstream verify dataset.tar",
    "shardstream verify shards-*.tar --json",
    "shardstream verify --no-decode 'pipe:cat dataset.tar'",
    "shardstream verify -q shards-*.tar && echo dataset ok",
    "shardstream verify -j 2 shards-*.tar",
)
_RECENT = 4096  # members remembered for locating problems (a sample is reported right after its last member)


@dataclasses.dataclass
class Problem:
    """One problem: where (shard, byte offset of the member data, member, sample key) and what."""

    url: str
    message: str
    offset: int | None = None
    member: str | None = None
    key: str | None = None

    def __str__(self) -> str:
        where = [f"offset {self.offset}"] if self.offset is not None else []
        where += [f"member {self.member!r}"] if self.member is not None else []
        where += [f"sample {self.key!r}"] if self.key is not None else []
        return f"{self.url}: {', '.join(where)}: {self.message}" if where else f"{self.url}: {self.message}"


@dataclasses.dataclass
class ShardReport:
    """What :func:`verify_shard` found in one shard."""

    url: str
    samples: int = 0
    fields_checked: int = 0
    not_checked: dict[str, int] = dataclasses.field(default_factory=dict)  # reason -> fields
    problems: list[Problem] = dataclasses.field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.not_checked[reason] = self.not_checked.get(reason, 0) + 1


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "verify", "check a dataset; exit 1 on problems", __doc__, EXAMPLES)
    add_inputs(p)
    p.add_argument("--no-decode", action="store_true", help="check the tar and sample structure only")
    p.add_argument("--allow-unsafe", action="store_true", help="also decode unsafe fields (.pyd, .pickle: unpickling)")
    p.add_argument("--no-index", action="store_true", help="do not check the indexes beside the shards")
    add_options(p, workers="shards checked at a time, each in its own process (default 1); the report is the "
                "same for any N", json="one JSON report on stdout")
    p.set_defaults(run=run)


def _unsafe_name(name: str) -> bool:
    return name.startswith("/") or "\\" in name or ".." in name.split("/")


def _check_fields(report: ShardReport, sample: dict[str, Any], located: dict, allow_unsafe: bool) -> None:
    key = sample["__key__"]
    for ext, data in fields(sample):
        if get_codec(ext) is None:
            report.skip("unknown extension")
            continue
        try:
            decode_field(ext, data, imagespec="pil", allow_unsafe=allow_unsafe)
        except UnsafeDecodeError:
            report.skip("unsafe")
            continue
        except MissingDependencyError as e:
            report.skip(f"needs {e.module or e.extra}")
            continue
        except Exception as e:  # any failure to decode is a problem of the data
            name, offset = located.get((key, ext), (None, None))
            text = e.problem if isinstance(e, DecodeError) else f"{type(e).__name__}: {e}"
            report.problems.append(Problem(report.url, text, offset, name, key))
            continue
        report.fields_checked += 1


def verify_shard(url: str, rule: KeyRule, *, decode: bool = True, allow_unsafe: bool = False) -> ShardReport:
    """Check one shard (see the module docstring); problems are collected, never raised."""
    report = ShardReport(url)
    located: collections.OrderedDict[tuple[str, str | None], tuple[str, int]] = collections.OrderedDict()

    def members(stream: Any) -> Iterator[tuple[str, bytes, int]]:
        for name, data, offset in iter_tar(stream, url):
            located[rule.split(name)] = (name, offset)
            if len(located) > _RECENT:
                located.popitem(last=False)
            if _unsafe_name(name):
                report.problems.append(Problem(url, "unsafe member name (absolute, '..' or backslash): extract "
                                                    "refuses it", offset, name))
            yield name, data, offset

    def on_sample_error(exc: BaseException) -> bool:
        assert isinstance(exc, SampleFormatError)
        found = located.get(rule.split(exc.member)) if exc.member is not None else None
        report.problems.append(Problem(url, exc.problem, found[1] if found else None, exc.member, exc.key))
        return True

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncatedTarWarning)
        try:
            with opened(url) as stream:
                for sample in group_samples(members(stream), url, rule=rule, handler=on_sample_error):
                    report.samples += 1
                    if decode:
                        _check_fields(report, sample, located, allow_unsafe)
        except TarFormatError as e:
            report.problems.append(Problem(url, e.problem, e.offset, e.member))
        except OpenError as e:
            report.problems.append(Problem(url, str(e)))
    for w in caught:
        if issubclass(w.category, TruncatedTarWarning):
            report.problems.append(Problem(url, " ".join(str(w.message).split())))
        else:  # pragma: no cover - other warnings go where they would have gone
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    report.problems.sort(key=lambda p: (p.offset is None, p.offset or 0))  # stable: in archive order
    return report


def _verify(url: str, rule: KeyRule, decode: bool, allow_unsafe: bool) -> ShardReport:
    return verify_shard(url, rule, decode=decode, allow_unsafe=allow_unsafe)


def _check_index(report: ShardReport, rule: KeyRule) -> None:
    """An index beside a local shard must match it (see :mod:`shardstream.cli.index`)."""
    report.problems.extend(Problem(report.url, problem) for problem in index_problems(report.url, rule))


def run(args: argparse.Namespace) -> int:
    rule = key_rule(args, lowercase=True)
    urls = resolve_inputs(args.inputs)
    reports = []
    jobs = [(url, rule, not args.no_decode, args.allow_unsafe) for url in urls]
    for report in progress(args, ordered_map(_verify, jobs, workers=args.workers), desc="verify", unit=" shards",
                           total=len(urls)):
        if not args.no_index:
            _check_index(report, rule)
        reports.append(report)
        if not args.json:
            _print_report(args, report)
    problems = sum(len(r.problems) for r in reports)
    if args.json:
        json.dump({"problems": problems, "shards": [dataclasses.asdict(r) for r in reports]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not args.quiet:
        _print_summary(reports, problems)
    sys.stdout.flush()
    return EXIT_PROBLEMS if problems else 0


def _print_report(args: argparse.Namespace, report: ShardReport) -> None:
    for problem in report.problems:
        print(problem)
    if not getattr(args, "quiet", False):
        status = plural(len(report.problems), "problem") if report.problems else "ok"
        print(f"{report.url}: {status}, {plural(report.samples, 'sample')}, "
              f"{plural(report.fields_checked, 'field')} decoded")


def _print_summary(reports: list[ShardReport], problems: int) -> None:
    skipped: dict[str, int] = {}
    for r in reports:
        for reason, n in r.not_checked.items():
            skipped[reason] = skipped.get(reason, 0) + n
    samples = sum(r.samples for r in reports)
    line = f"verified {plural(len(reports), 'shard')}, {plural(samples, 'sample')}: "
    bad = sum(1 for r in reports if r.problems)
    line += f"{plural(problems, 'problem')} in {plural(bad, 'shard')}" if problems else "no problems"
    if skipped:
        line += "; fields not checked: " + ", ".join(f"{n} ({reason})" for reason, n in sorted(skipped.items()))
        if "unsafe" in skipped:
            line += " (--allow-unsafe to decode unsafe fields of a trusted dataset)"
    print(line)
