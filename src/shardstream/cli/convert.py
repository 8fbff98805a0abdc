"""``shardstream convert``: convert a dataset from another format into shards (or shards into Parquet), in
parallel on a local process pool or a Dask cluster (see :mod:`shardstream.convert`).

SOURCE is a Hugging Face dataset saved with save_to_disk, Parquet, TFRecord (tf.Example, gzip or not), CSV,
TSV or JSON Lines (path columns name files to include), an ImageFolder, or WebDataset shards; the format is
detected from the folder or the file names, or given with --from. DEST is a directory or a URL prefix
(s3://bucket/prefix). Shards are named PREFIX-TTTTTT-PPP.tar (task, part); each task writes a manifest last,
so running the same command again skips what is complete and redoes what failed. Records that cannot be
converted are counted in the summary (--report FILE lists them).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..convert import convert, detect
from ..errors import ProcessingError
from ..io.files import write_file
from ._common import EXIT_DATA, CommandError, command, examples, message, parse_size, plural, positive_int

__all__ = ["add_job_options", "register", "run", "summary"]

EXAMPLES = examples(
    "shardstream convert images/ converted/ --workers 2",
    "shardstream convert samples.jsonl captions/ --maxcount 1000 --engine inline",
    "shardstream convert 'shards-{000000..000003}.tar' as-parquet/ --to parquet --workers 2",
    note="Engines: local (a process pool, default; --workers N), dask (--scheduler tcp://HOST:8786, or a\n"
    "LocalCluster of --workers processes), inline (this process, for debugging).",
)


def add_job_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``convert`` and ``map``: engine, workers, output sizes, retries."""
    p.add_argument("--engine", choices=("local", "dask", "inline"), help="where tasks run (default: local, or "
                   "dask with --scheduler)")
    p.add_argument("--scheduler", metavar="ADDR", help="address of a Dask scheduler (implies --engine dask)")
    p.add_argument("--workers", type=positive_int, help="worker processes (local pool, or a Dask LocalCluster)")
    p.add_argument("--maxcount", type=positive_int, default=100000, help="most samples per output shard")
    p.add_argument("--maxsize", type=parse_size, default=3_000_000_000, help="most bytes per output shard")
    p.add_argument("--prefix", default="part", help="first part of the output names (default: part)")
    p.add_argument("--retries", type=int, default=2, help="attempts after a task's first failure (default 2)")
    p.add_argument("--no-index", dest="index", action="store_false", help="write no indexes")
    p.add_argument("--overwrite", action="store_true", help="redo tasks that an earlier run completed")
    p.add_argument("--report", metavar="FILE", help="write the skipped records and failures as JSON")


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "convert",
                "convert HF/Parquet/TFRecord/CSV/JSONL/ImageFolder to shards", __doc__, EXAMPLES, read=False)
    p.add_argument("source", nargs="+", help="files, a folder, or a glob/brace pattern (SOURCE... DEST)")
    p.add_argument("--from", dest="kind", default="auto",
                   choices=("auto", "hf", "parquet", "tfrecord", "csv", "tsv", "jsonl", "imagefolder", "shards"),
                   help="the format of SOURCE (default: detected)")
    p.add_argument("--to", choices=("shards", "parquet"), default="shards", help="what to write (default shards)")
    p.add_argument("--key", metavar="COLUMN", help="the column or feature that holds each sample's key")
    p.add_argument("--paths", metavar="COLUMNS", help="comma-separated CSV/JSONL columns naming files to include "
                   "(default: columns ending in path, file or filename)")
    p.add_argument("--rename", metavar="COL=FIELD", action="append", default=[],
                   help="name the field of a column (e.g. image=jpg); repeatable")
    p.add_argument("--split", help="the split of a Hugging Face DatasetDict (default: every split into DEST/SPLIT)")
    p.add_argument("--per-task", type=positive_int, help="rows or files per task (default: about 32 tasks, 1,000-100,000 rows or 16-256 MiB of files each)")
    add_job_options(p)
    p.set_defaults(run=run)


def summary(result: Any) -> str:
    """One line: samples, shards, tasks (reused), skipped records."""
    text = (f"{result.samples:,} samples in {plural(len(result.shards), 'file')} from {plural(result.tasks, 'task')}"
            f" ({result.reused} already complete)")
    if result.skipped:
        first = result.skipped[0]
        text += f"; {plural(len(result.skipped), 'record')} skipped, e.g. {first[1].key!r} in {first[0]}: {first[1].reason}"
    return text + (f"; dataset index {result.index}" if result.index else "")


def _report(path: str | None, result: Any, failures: list) -> None:
    if not path:
        return
    doc = {"skipped": [{"input": url, "key": s.key, "reason": s.reason} for url, s in (result.skipped if result else ())],
           "failures": [{"task": f.index, "input": f.url, "error": f.error, "attempts": f.attempts} for f in failures]}
    write_file(path, json.dumps(doc, indent=1).encode("utf-8"), "the report")  # never through a symbolic link


def job_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of a job from the shared options."""
    return {"engine": args.engine, "workers": args.workers, "scheduler": args.scheduler, "maxcount": args.maxcount,
                "maxsize": args.maxsize, "prefix": args.prefix, "index": args.index, "retries": args.retries,
                "progress": None if not getattr(args, "quiet", False) else False, "overwrite": args.overwrite}


def finish(args: argparse.Namespace, job: Any) -> int:
    """Run ``job()``; report its summary, or its failures (exit status 3)."""
    try:
        result = job()
    except ProcessingError as e:
        _report(args.report, e.result, e.failures)
        for failure in e.failures:
            message(args, f"failed: {failure}")
        raise CommandError(str(e), EXIT_DATA) from e
    _report(args.report, result, [])
    message(args, summary(result))
    return 0


def run(args: argparse.Namespace) -> int:
    if len(args.source) < 2:
        raise CommandError("give SOURCE... DEST", 2)
    *sources, dest = args.source
    src: Any = sources[0] if len(sources) == 1 else sources
    rename = {}
    for item in args.rename:
        column, sep, field = item.partition("=")
        if not sep or not column or not field:
            raise CommandError(f"--rename {item!r}: expected COLUMN=FIELD", 2)
        rename[column] = field
    options = {"kind": args.kind, "to": args.to, "key": args.key, "rename": rename, "per_task": args.per_task,
                   "paths": None if args.paths is None else [c for c in args.paths.split(",") if c]}
    kind = detect(src) if args.kind == "auto" else args.kind
    if kind == "hf" and args.split is None and isinstance(src, str):
        listing = os.path.join(src, "dataset_dict.json")
        if os.path.exists(listing):
            with open(listing) as f:
                splits = json.load(f).get("splits", [])
            for split in splits:
                message(args, f"split {split}:")
                finish(args, lambda split=split: convert(src, os.path.join(dest, split), split=split,
                                                         **options, **job_kwargs(args)))
            return 0
    return finish(args, lambda: convert(src, dest, split=args.split, **options, **job_kwargs(args)))
