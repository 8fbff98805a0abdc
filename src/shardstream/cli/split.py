"""``shardstream split`` (alias ``reshard``): rewrite a dataset into N shards, or shards of a given count or size.

A sample is never split across shards, and bytes are copied as they are.

- ``--maxcount N`` / ``--maxsize SIZE``: the samples in their order, a new shard whenever the next sample would
  exceed N samples or SIZE bytes (the real shard size: headers, padding and end of archive included).
- ``-n N``: exactly N shards in one pass, so it works on streams (``-``, ``pipe:``) whose length is unknown:
  sample ``i`` goes to shard ``i mod N`` (shard sizes differ by at most one sample; shards beyond the number of
  samples are valid empty tars). N shards are open at once. To keep the samples in order, use ``--maxcount``.

``-j N`` with ``--maxcount`` (no ``--maxsize``) counts the samples of each input shard, then writes the output
shards on N processes (the inputs are read twice; the bytes are the same as with one process).

Note: tarproc's ``tarsplit -n`` meant samples per shard; that is ``--maxcount`` here.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
from typing import Any

from ..errors import ConfigError
from ._common import CommandError, Progress, dataset_samples, key_rule, message, plural, positive_int
from ._inputs import resolve_inputs
from ._options import add_inputs, command, examples
from ._output import SampleOutput, add_output_options, finish, is_pattern, output_options, shard_name
from ._parallel import (
    WORKERS_HELP,
    can_write_in_parallel,
    count_pieces,
    count_samples,
    ordered_map,
    read_segments,
    segments,
    summary,
    write_parallel,
)
from ._replace import OutputPlan

__all__ = ["register", "run"]

EXAMPLES = examples(
    "shardstream split dataset.tar -n 4 -o 'part-%06d.tar'",
    "shardstream reshard shards-*.tar --maxcount 5 -o 'small/small-%06d.tar'",
    "shardstream split dataset.tar --maxsize 64K -o 'sized-{shard:04d}.tar'",
    "shardstream split dataset.tar --maxcount 3 -o 'sized-{shard:04d}.tar' --overwrite --dry-run --json",
    "cat dataset.tar | shardstream split - --maxcount 7 -o 'stdin-%06d.tar'",
    "shardstream split shards-*.tar --maxcount 6 -j 2 -o 'parallel/part-%06d.tar'",
)

#: -n above this many shards is refused when the open-file limit cannot be read
_MAX_OPEN = 1000


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "split",
                "rewrite a dataset into N shards or shards of a given count/size", __doc__, EXAMPLES, aliases=["reshard"])
    add_inputs(p)
    add_output_options(p, workers=WORKERS_HELP)
    p.add_argument("-n", "--shards", type=positive_int, metavar="N",
                   help="exactly N shards: sample i goes to shard i mod N (one pass, works on streams)")
    p.set_defaults(run=run)


def _open_limit() -> int:
    try:
        import resource  # noqa: PLC0415 - Unix only
    except ImportError:  # pragma: no cover - not POSIX
        return _MAX_OPEN
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _MAX_OPEN if soft == resource.RLIM_INFINITY else max(soft - 64, 16)


def run(args: argparse.Namespace) -> int:
    if not is_pattern(args.output):
        raise ConfigError(f"split writes shards: -o needs a shard pattern such as 'out-%06d.tar', got {args.output!r}")
    if args.shards is None and args.maxcount is None and args.maxsize is None:
        raise ConfigError("give the number of shards (-n N) or their size (--maxcount N, --maxsize SIZE)")
    if args.shards is not None and (args.maxcount is not None or args.maxsize is not None):
        raise ConfigError("-n cannot be combined with --maxcount/--maxsize")
    inputs = resolve_inputs(args.inputs)
    options = output_options(args)
    samples = dataset_samples(inputs, key_rule(args, lowercase=False))
    if args.shards is None and can_write_in_parallel(args):
        rule = key_rule(args, lowercase=False)
        counts = list(ordered_map(count_samples, [(url, rule) for url in inputs], workers=args.workers))
        pieces = [segments(counts, a, b) for a, b in count_pieces(sum(counts), args.maxcount)]
        result = write_parallel(args, "split", functools.partial(read_segments, inputs, rule), pieces, inputs)
        return finish(args, "split", result, summary(result))
    if args.shards is None:
        with SampleOutput(args.output, inputs=inputs, **options) as out, Progress(args, desc="split") as bar:
            for sample in samples:
                out.write(sample)
                bar.update()
        return finish(args, "split", out.result(), out.summary())
    if args.workers > 1:
        message(args, f"-j {args.workers}: split -n writes on one process (one pass, sample i to shard i mod N)")
    if args.shards > _open_limit():
        raise CommandError(f"-n {args.shards} would open more files than allowed at once ({_open_limit()}); "
                           "use --maxcount or --maxsize instead", code=2)
    plan = OutputPlan(args.output, overwrite=args.overwrite)
    del options["maxcount"], options["maxsize"], options["overwrite"]
    total = 0
    try:
        with contextlib.ExitStack() as stack:
            outputs = [
                stack.enter_context(SampleOutput(shard_name(args.output, i), inputs=inputs, plan=plan,
                                                 write_as=shard_name(plan.write_pattern, i), **options))
                for i in range(args.shards)
            ]
            with Progress(args, desc="split") as bar:
                for total, sample in enumerate(samples, 1):
                    outputs[(total - 1) % args.shards].write(sample)
                    bar.update()
    except BaseException:
        if not args.dry_run:
            plan.discard(args.shards)
        raise
    removed = plan.would_remove(args.shards) if args.dry_run else plan.commit(args.shards)[1]
    shards = [info for out in outputs for info in out.result()["shards"]]
    result = {"output": args.output, "dry_run": args.dry_run, "samples": total, "shards": shards,
              "replaced": removed, "renamed_keys": sum(out.renamed for out in outputs)}
    verb = "dry run: would write" if args.dry_run else "wrote"
    line = f"{verb} {plural(total, 'sample')} to {plural(args.shards, 'shard')} ({args.output})"
    if removed:
        line += f"; {'would replace' if args.dry_run else 'replaced'} {plural(len(removed), 'old file')}"
    return finish(args, "split", result, line)
