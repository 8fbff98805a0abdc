"""``shardstream convert``: convert a dataset from another format into shards (or shards into Parquet), in
parallel on a local process pool or a Dask cluster (see :mod:`shardstream.convert`).

SOURCE is a Hugging Face dataset saved with save_to_disk, Parquet, TFRecord (tf.Example, gzip or not), CSV,
TSV or JSON Lines (path columns name files to include), an ImageFolder, or WebDataset shards; the format is
detected from the folder or the file names, or given with --from. ``-o DEST`` is a directory or a URL prefix
(s3://bucket/prefix). Shards are named PREFIX-TTTTTT-PPP.tar (task, part); each task writes a manifest last,
so running the same command again skips what is complete (``--redo`` recomputes it) and redoes what failed.
Records that cannot be converted are counted in the summary (--report FILE lists them).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..convert import ParquetOutput, convert, detect, plan
from ..process import TarOutput, Task
from ._common import EXIT_USAGE, CommandError, message, positive_int
from ._jobs import add_job_options, dry_run, finish, job_kwargs, output_of
from ._options import command, examples

__all__ = ["register", "run"]

EXAMPLES = examples(
    "shardstream convert images/ -o converted/ -j 2",
    "shardstream convert samples.jsonl -o captions/ --maxcount 1000 --engine inline",
    "shardstream convert 'shards-{000000..000003}.tar' -o as-parquet/ --to parquet -j 2",
    "shardstream convert samples.jsonl -o captions/ --engine inline --dry-run",
    "shardstream convert samples.jsonl -o named/ --engine inline --fields txt=caption.txt",
    note="Engines: local (a process pool, default; -j N), dask (--scheduler tcp://HOST:8786, or a\n"
    "LocalCluster of -j processes), inline (this process, for debugging).",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "convert", "convert HF/Parquet/TFRecord/CSV/JSONL/ImageFolder to shards, in parallel",
                __doc__, EXAMPLES, read=False, usage="%(prog)s SOURCE [SOURCE ...] -o DEST [options]")
    p.add_argument("source", nargs="+", metavar="SOURCE", help="files, a folder, or a glob/brace pattern")
    p.add_argument("--from", dest="kind", default="auto",
                   choices=("auto", "hf", "parquet", "tfrecord", "csv", "tsv", "jsonl", "imagefolder", "shards"),
                   help="the format of SOURCE (default: detected)")
    p.add_argument("--to", choices=("shards", "parquet"), default="shards", help="what to write (default shards)")
    p.add_argument("--key", metavar="COLUMN", help="the column or feature that holds each sample's key")
    p.add_argument("--paths", metavar="COLUMNS", help="comma-separated CSV/JSONL columns naming files to include "
                   "(default: columns ending in path, file or filename)")
    p.add_argument("--fields", metavar="COL=FIELD,...", action="append", default=[],
                   help="name the fields of columns, over the default names (the one file/image column: its "
                   "extension, e.g. jpg; the one integer label column: cls); e.g. image=img.png,label=label.cls")
    p.add_argument("--rename", metavar="COL=FIELD", action="append", default=[],
                   help="name the field of one column (older spelling of --fields); repeatable")
    p.add_argument("--split", help="the split of a Hugging Face DatasetDict (default: every split into DEST/SPLIT)")
    p.add_argument("--per-task", type=positive_int, metavar="N", help="rows or files per task (default: about 32 "
                   "tasks, 1,000-100,000 rows or 16-256 MiB of files each)")
    add_job_options(p)
    p.set_defaults(run=run)


def _planned(src: Any, dest: str, split: str | None, options: dict[str, Any], args: argparse.Namespace) -> list[Task]:
    """The tasks :func:`shardstream.convert.convert` would run (for ``--dry-run``)."""
    if args.to == "parquet":
        output: Any = ParquetOutput(dest, prefix=args.prefix, maxcount=args.maxcount, maxsize=min(args.maxsize, 512 << 20))
    else:
        output = TarOutput(dest, prefix=args.prefix, maxcount=args.maxcount, maxsize=args.maxsize, index=args.index)
    sources = plan(src, options["kind"], key=options["key"], paths=options["paths"], rename=options["rename"],
                   split=split, per_task=options["per_task"])
    return [Task(i, source, output) for i, source in enumerate(sources)]


def _one(args: argparse.Namespace, src: Any, dest: str, split: str | None, options: dict[str, Any]) -> int:
    if args.dry_run:
        return dry_run(args, "convert", dest, _planned(src, dest, split, options, args))
    return finish(args, "convert", dest, lambda: convert(src, dest, split=split, **options, **job_kwargs(args)))


def run(args: argparse.Namespace) -> int:
    sources, dest = output_of(args, "convert")
    src: Any = sources[0] if len(sources) == 1 else sources
    rename = {}
    for flag, items in (("--rename", args.rename), ("--fields", [i for f in args.fields for i in f.split(",") if i])):
        for item in items:
            column, sep, field = item.partition("=")
            if not sep or not column or not field:
                raise CommandError(f"{flag} {item!r}: expected COLUMN=FIELD", EXIT_USAGE)
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
                _one(args, src, os.path.join(dest, split), split, options)
            return 0
    return _one(args, src, dest, args.split, options)
