"""What ``convert`` and ``map`` share: they run a job of tasks (see :mod:`shardstream.process`) that writes under one
output location, resumes (a complete task is skipped by a rerun) and retries.

Their options come from :func:`~shardstream.cli._options.add_options` like every command's: ``-o DEST``,
``-j N``, ``--redo`` (recompute complete tasks), ``--dry-run`` (the tasks that would run, and those complete)
and ``--json``; ``--overwrite`` is, for one release, the old spelling of ``--redo`` (with a warning). The old
form ``SOURCE... DEST`` (the output last) still works, with a warning naming ``-o DEST``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ProcessingError
from ..io.files import write_file
from ..process.tasks import Task, load_complete
from ..redact import redacting_logger
from ._common import EXIT_DATA, CommandError, message, parse_size, plural, positive_int
from ._options import add_options, output_or_last

__all__ = ["add_job_options", "dry_run", "finish", "job_kwargs", "output_of", "summary"]

log = redacting_logger("shardstream.cli")


def add_job_options(p: argparse.ArgumentParser) -> None:
    """The options of a job: output, engine, workers, output sizes, retries, resuming."""
    add_options(p, output="the output: a directory or a URL prefix (s3://bucket/prefix)", output_metavar="DEST",
                required_output=False, workers_default=None,
                workers="worker processes (a local pool, or a Dask LocalCluster; default: one per CPU)",
                overwrite="the old spelling of --redo (for one release): redo every task",
                redo="recompute the tasks an earlier run completed (by default a rerun skips them)",
                dry_run="list the tasks that would run and those already complete; write nothing",
                json="print the result as one JSON document on stdout")
    p.add_argument("--engine", choices=("local", "dask", "inline"), help="where tasks run (default: local, or "
                   "dask with --scheduler)")
    p.add_argument("--scheduler", metavar="ADDR", help="address of a Dask scheduler (implies --engine dask)")
    p.add_argument("--maxcount", type=positive_int, default=100000, metavar="N", help="most samples per output shard")
    p.add_argument("--maxsize", type=parse_size, default=3_000_000_000, metavar="SIZE",
                   help="most bytes per output shard")
    p.add_argument("--prefix", default="part", help="first part of the output names (default: part)")
    p.add_argument("--retries", type=int, default=2, metavar="N", help="attempts after a task's first failure "
                   "(default 2)")
    p.add_argument("--no-index", dest="index", action="store_false", help="write no indexes")
    p.add_argument("--report", metavar="FILE", help="write the skipped records and failures as JSON")


def output_of(args: argparse.Namespace, command: str) -> tuple[list[str], str]:
    """``(sources, DEST)`` (see :func:`~shardstream.cli._options.output_or_last`), and the warning of the old
    ``--overwrite``."""
    if args.overwrite:
        log.warning("shardstream %s: --overwrite is the old spelling of --redo (recompute the tasks an earlier run "
                    "completed); write --redo", command)
    return output_or_last(args, "source", command)


def job_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of a job from the shared options."""
    return {"engine": args.engine, "workers": args.workers, "scheduler": args.scheduler, "maxcount": args.maxcount,
            "maxsize": args.maxsize, "prefix": args.prefix, "index": args.index, "retries": args.retries,
            "progress": None if not getattr(args, "quiet", False) else False,
            "overwrite": args.redo or args.overwrite}


def summary(result: Any) -> str:
    """One line: samples, shards, tasks (reused), skipped records."""
    text = (f"{result.samples:,} samples in {plural(len(result.shards), 'file')} from {plural(result.tasks, 'task')}"
            f" ({result.reused} already complete)")
    if result.skipped:
        first = result.skipped[0]
        text += (f"; {plural(len(result.skipped), 'record')} skipped, e.g. {first[1].key!r} in {first[0]}: "
                 f"{first[1].reason}")
    return text + (f"; dataset index {result.index}" if result.index else "")


def _report(path: str | None, result: Any, failures: Sequence[Any]) -> None:
    if not path:
        return
    doc = {"skipped": [{"input": url, "key": s.key, "reason": s.reason} for url, s in (result.skipped if result else ())],
           "failures": [{"task": f.index, "input": f.url, "error": f.error, "attempts": f.attempts} for f in failures]}
    write_file(path, json.dumps(doc, indent=1).encode("utf-8"), "the report")  # never through a symbolic link


def _as_json(command: str, dest: str, result: Any) -> dict[str, Any]:
    return {"command": command, "output": dest, "dry_run": False, "samples": result.samples,
            "samples_in": result.samples_in, "tasks": result.tasks, "reused": result.reused,
            "shards": [{"path": s.path, "samples": s.samples, "bytes": s.bytes} for s in result.shards],
            "skipped": [{"input": url, "key": s.key, "reason": s.reason} for url, s in result.skipped],
            "index": result.index}


def _print_json(doc: dict[str, Any]) -> None:
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")
    sys.stdout.flush()


def finish(args: argparse.Namespace, command: str, dest: str, job: Callable[[], Any]) -> int:
    """Run ``job()``; report its result (a line on stderr, or ``--json``), or its failures (exit status 3)."""
    try:
        result = job()
    except ProcessingError as e:
        _report(args.report, e.result, e.failures)
        for failure in e.failures:
            message(args, f"failed: {failure}")
        raise CommandError(str(e), EXIT_DATA) from e
    _report(args.report, result, [])
    if args.json:
        _print_json(_as_json(command, dest, result))
    else:
        message(args, summary(result))
    return 0


def dry_run(args: argparse.Namespace, command: str, dest: str, tasks: Sequence[Task]) -> int:
    """Report which of ``tasks`` would run and which an earlier run completed (they would be skipped); write
    nothing."""
    redo = args.redo or args.overwrite
    rows = []
    for task in tasks:
        done = None if redo else load_complete(task)
        rows.append({"task": task.index, "input": task.source.url, "complete": done is not None})
    complete = sum(1 for r in rows if r["complete"])
    if args.json:
        _print_json({"command": command, "output": dest, "dry_run": True, "tasks": rows})
    else:
        for row in rows:
            print(f"task {row['task']}: {'complete, skipped' if row['complete'] else 'would run'}: {row['input']}")
        message(args, f"dry run: would run {plural(len(rows) - complete, 'task')} into {dest} "
                      f"({complete} already complete); wrote nothing")
    return 0
