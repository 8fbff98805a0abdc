"""``shardstream index``: build the shard indexes (random access) and, on request, DALI ``.idx`` files.

For each shard ``NAME.tar`` this writes its sidecar index ``NAME.tar.ssidx`` (see
:mod:`shardstream.indexed`) by scanning the headers only (member data is not read). Sidecars that already match
their shard are kept unless ``--overwrite``. ``-o PATH`` also writes the dataset index, one JSON file for
the whole dataset (``IndexedDataset(PATH)`` opens it). ``--dali`` also writes NVIDIA DALI's index ``NAME.idx``
(format v1.2) for ``fn.readers.webdataset(index_paths=...)``. Shards must be local, uncompressed files: random
access needs offsets in a file (copy remote shards first; decompress ``.tar.gz``).

``shardstream verify`` checks that the indexes beside the shards are fresh (see :func:`index_problems`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

from ..errors import OpenError, SampleFormatError, StaleIndexError
from ..indexed import ShardIndex, index_dataset, index_shard, open_source, sidecar_path, write_dali_index
from ..indexed.shardindex import rule_spec
from ..samples import KeyRule
from ._common import key_rule, local_path, message, plural, progress
from ._inputs import resolve_inputs
from ._options import add_inputs, add_old_spelling, add_options, command, examples

__all__ = ["dali_path", "index_problems", "register", "run"]

EXAMPLES = examples(
    "shardstream index dataset.tar",
    "shardstream index shards-*.tar -o shards.json --dali",
    "shardstream index shards-*.tar --overwrite --quiet",
    "shardstream index . --json",
    "shardstream index shards-*.tar --dali --dry-run",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "index", "build shard indexes and DALI .idx files", __doc__, EXAMPLES,
                usage="%(prog)s SHARD [SHARD ...] [-o PATH] [options]")
    add_inputs(p, metavar="SHARD")
    add_options(p, output="also write the dataset index (JSON) to PATH (the sidecar indexes are always written "
                          "beside their shards)", output_metavar="PATH", required_output=False,
                overwrite="rebuild the index files even when they match their shard",
                dry_run="print the index files that would be written; write nothing",
                json="print the index files written (or kept) as one JSON document on stdout")
    add_old_spelling(p, "--dataset", dest="output", new="-o PATH", metavar="PATH")
    add_old_spelling(p, "--rebuild", dest="overwrite", new="--overwrite", flag=True)
    p.add_argument("--dali", action="store_true", help="also write DALI index files (NAME.idx beside NAME.tar)")
    p.set_defaults(run=run)


def dali_path(shard: str) -> str:
    """Where ``--dali`` writes the DALI index of ``shard`` (``.tar`` replaced by ``.idx``, as DALI's wds2idx)."""
    return (shard[:-4] if shard.endswith(".tar") else shard) + ".idx"


def _rule_for_index(rule: KeyRule) -> Any:
    return None if rule.rule in (None, "first-dot") and rule.lowercase else rule


def run(args: argparse.Namespace) -> int:
    rule = key_rule(args, lowercase=True)
    shards = resolve_inputs(args.inputs)
    if args.dry_run:
        return _dry_run(args, shards, rule)
    built: list[str] = []
    kept: list[str] = []
    written: list[str] = []
    for shard in progress(args, shards, desc="index", unit=" shards", total=len(shards)):
        if args.output is None:  # (index_dataset below builds or reuses the sidecars itself)
            if args.overwrite or not _fresh(shard, rule):
                index_shard(shard, rule=_rule_for_index(rule))
                built.append(sidecar_path(shard))
            else:
                kept.append(sidecar_path(shard))
        if args.dali:
            write_dali_index(shard, dali_path(shard), rule=_rule_for_index(rule))
            written.append(dali_path(shard))
    dali = "; DALI .idx files written" if args.dali else ""
    samples = None
    if args.output is not None:
        result = index_dataset(shards, args.output, rule=_rule_for_index(rule), rebuild=args.overwrite)
        samples = len(result)
        written.append(args.output)
        line = f"indexed {plural(len(shards), 'shard')}, {plural(samples, 'sample')}; dataset index {args.output}{dali}"
    else:
        line = f"indexed {plural(len(shards), 'shard')} ({len(built)} built, {len(kept)} already fresh){dali}"
    if args.json:
        _print_json({"command": "index", "dry_run": False, "shards": shards, "built": built, "kept": kept,
                     "written": written, "samples": samples})
    message(args, line)
    return 0


def _print_json(doc: dict[str, Any]) -> None:
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")
    sys.stdout.flush()


def _dry_run(args: argparse.Namespace, shards: list[str], rule: KeyRule) -> int:
    """Print the index files that would be written (one path a line); write nothing."""
    paths = [sidecar_path(s) for s in shards if args.overwrite or not _fresh(s, rule)]
    paths += [dali_path(s) for s in shards] if args.dali else []
    paths += [args.output] if args.output is not None else []
    if args.json:
        _print_json({"command": "index", "dry_run": True, "shards": shards, "written": paths})
    else:
        for path in paths:
            print(path)
    message(args, f"dry run: would write {plural(len(paths), 'index file')}")
    return 0


def _fresh(shard: str, rule: KeyRule) -> bool:
    """Whether the sidecar of ``shard`` exists, matches it and was built with ``rule``."""
    try:
        index = ShardIndex.load(shard)
        source = open_source(shard)
        try:
            index.check(source)
        finally:
            source.close()
    except (OpenError, StaleIndexError):
        return False
    return (index.rule, index.lowercase) == _spec(rule)


def index_problems(url: str, rule: KeyRule) -> list[str]:
    """What is wrong with the indexes beside a local shard (empty: fresh, or no index there).

    The sidecar must match the shard (size and fingerprint) and list exactly the samples and
    members a header scan finds now (when it was built with the same key rule); a DALI ``.idx`` beside the shard
    must be what ``shardstream index --dali`` would write now.
    """
    path = local_path(url)
    if path is None or not os.path.isfile(path):
        return []
    problems = []
    if os.path.exists(sidecar_path(path)):
        try:
            index = ShardIndex.load(url)
            source = open_source(url)
            try:
                index.check(source)
            finally:
                source.close()
            same_rule = (index.rule, index.lowercase) == _spec(rule)
            if same_rule and index != index_shard(url, rule=_rule_for_index(rule), save=False):
                problems.append(f"the index {sidecar_path(path)!r} does not list the shard's current members; "
                                f"rebuild it with `shardstream index --overwrite {url}`")
        except StaleIndexError as e:
            problems.append(str(e))
        except (SampleFormatError, OpenError, ValueError):
            pass  # the shard itself is broken: verify reports that on its own
    dali = dali_path(path)
    if os.path.exists(dali) and path.endswith(".tar"):
        problem = _dali_problem(url, dali, rule)
        if problem:
            problems.append(problem)
    return problems


def _spec(rule: KeyRule) -> tuple[str, bool]:
    return rule_spec(_rule_for_index(rule))


def _dali_problem(url: str, dali: str, rule: KeyRule) -> str | None:
    with tempfile.TemporaryDirectory(prefix="shardstream-idx-") as tmp:
        fresh = os.path.join(tmp, "fresh.idx")
        try:
            write_dali_index(url, fresh, rule=_rule_for_index(rule))
        except (SampleFormatError, OpenError, ValueError):
            return None  # the shard itself is broken: verify reports that on its own
        with open(fresh, "rb") as a, open(dali, "rb") as b:
            if a.read() == b.read():
                return None
    return f"the DALI index {dali!r} does not match the shard; rebuild it with `shardstream index --dali {url}`"
