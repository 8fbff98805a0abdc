"""``-j/--workers``: several processes for commands over many shards, with the same output as one process.

The output never depends on the number of workers: work is cut into pieces whose results are fixed before
anything runs (one output shard each, or one input shard each for ``verify``), and the results are taken in
order. Writing commands run in parallel when the shard boundaries are known in advance: a shard pattern with
``--maxcount`` and no ``--maxsize`` (a size boundary depends on what came before). Each worker writes whole
shards under the temporary names of :class:`~shardstream.cli._replace.OutputPlan`, and the main process renames
them into place when every worker is done, so a failure leaves no partial set.

>>> list(ordered_map(pow, [(2, 3), (3, 2)], workers=1))
[8, 9]
>>> count_pieces(7, 3)
[(0, 3), (3, 6), (6, 7)]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..samples import KeyRule
from ._common import Progress, message, plural, shard_samples
from ._output import SampleOutput
from ._replace import OutputPlan, is_pattern, shard_name

__all__ = ["WORKERS_HELP", "can_write_in_parallel", "count_pieces", "ordered_map", "write_parallel"]


#: the help of ``-j/--workers`` in the commands that write shards in parallel
WORKERS_HELP = ("processes to use (default 1): a shard pattern with --maxcount (no --maxsize) is written in "
                "parallel; the output is the same for any N")


def ordered_map(function: Callable[..., Any], arguments: Iterable[tuple[Any, ...]], *, workers: int
                ) -> Iterator[Any]:
    """``function(*args)`` for each argument tuple, in order, on ``workers`` processes (1: in this process)."""
    if workers <= 1:
        for args in arguments:
            yield function(*args)
        return
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(function, *zip(*arguments, strict=True))


def count_pieces(total: int, size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges of ``size`` items covering ``total`` items."""
    return [(start, min(total, start + size)) for start in range(0, total, size)]


def can_write_in_parallel(args: argparse.Namespace) -> bool:
    """Whether a writing command's output can be cut into shards in advance (see the module docstring)."""
    if getattr(args, "workers", 1) <= 1 or args.dry_run:
        return False
    if is_pattern(args.output) and args.maxcount is not None and args.maxsize is None:
        return True
    message(args, f"-j {args.workers}: writing on one process (parallel writing needs a shard pattern with "
                  "--maxcount and no --maxsize, so that the shards are known in advance)")
    return False


def _write_piece(final: str, temp: str, make: Callable[..., Iterable[dict[str, Any]]], piece: Any,
                 duplicates: str) -> dict[str, Any]:
    with SampleOutput(final, duplicates=duplicates, plan=_NO_PLAN, write_as=temp) as out:
        for sample in make(piece):
            out.write(sample)
    return out.result()["shards"][0]


class _NoPlan:
    """Stands for the caller's plan inside a worker (the caller checks and commits)."""

    existing: list[str] = []
    write_pattern = ""


_NO_PLAN: Any = _NoPlan()


def write_parallel(args: argparse.Namespace, command: str, make: Callable[[Any], Iterable[dict[str, Any]]],
                   pieces: list[Any], inputs: Iterable[str] = ()) -> dict[str, Any]:
    """Write ``make(piece)`` for each piece as shard number ``k`` of ``args.output`` on ``args.workers``
    processes; then replace the old set. Returns the ``--json`` result."""
    SampleOutput(args.output, inputs=inputs, dry_run=True, overwrite=True)  # the same checks as one process
    plan = OutputPlan(args.output, overwrite=args.overwrite)
    jobs = [(shard_name(args.output, k), shard_name(plan.write_pattern, k), make, piece, args.duplicate_keys)
            for k, piece in enumerate(pieces)]
    infos: list[dict[str, Any]] = []
    try:
        with Progress(args, desc=command, unit=" shards", total=len(jobs)) as bar:
            for info in ordered_map(_write_piece, jobs, workers=args.workers):
                infos.append(info)
                bar.update()
    except BaseException:
        plan.discard(len(jobs))
        raise
    _, removed = plan.commit(len(jobs))
    return {"output": args.output, "dry_run": False, "samples": sum(i["samples"] for i in infos), "shards": infos,
            "replaced": removed, "renamed_keys": 0, "workers": args.workers}


def summary(result: dict[str, Any]) -> str:
    """The stderr line of :func:`write_parallel`'s result."""
    line = (f"wrote {plural(result['samples'], 'sample')} to {plural(len(result['shards']), 'shard')} "
            f"({result['output']}) with {plural(result['workers'], 'worker')}")
    if result["replaced"]:
        line += f"; replaced {plural(len(result['replaced']), 'old file')}"
    return line


def count_samples(url: str, rule: KeyRule) -> int:
    """The number of samples of one shard (read through)."""
    return sum(1 for _ in shard_samples(url, rule))


def segments(counts: list[int], start: int, stop: int) -> list[tuple[int, int, int]]:
    """The ``(input number, skip, take)`` pieces of the samples ``[start, stop)`` of inputs of ``counts``.

    >>> segments([5, 5, 5], 3, 11)
    [(0, 3, 2), (1, 0, 5), (2, 0, 1)]
    """
    out = []
    first = 0
    for number, count in enumerate(counts):
        lo, hi = max(start, first), min(stop, first + count)
        if lo < hi:
            out.append((number, lo - first, hi - lo))
        first += count
    return out


def read_segments(urls: list[str], rule: KeyRule, piece: list[tuple[int, int, int]]) -> Iterator[dict[str, Any]]:
    """The samples of the segments of :func:`segments`."""
    for number, skip, take in piece:
        yield from itertools.islice(shard_samples(urls[number], rule), skip, skip + take)
