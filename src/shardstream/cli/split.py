"""``shardstream split`` (alias ``reshard``): rewrite a dataset into N shards, or shards of a given count or size.

A sample is never split across shards, and bytes are copied as they are.

- ``--maxcount N`` / ``--maxsize SIZE``: the samples in their order, a new shard whenever the next sample would
  exceed N samples or SIZE bytes (the real shard size: headers, padding and end of archive included).
- ``-n N``: exactly N shards in one pass, so it works on streams (``-``, ``pipe:``) whose length is unknown:
  sample ``i`` goes to shard ``i mod N`` (shard sizes differ by at most one sample; shards beyond the number of
  samples are valid empty tars). N shards are open at once. To keep the samples in order, use ``--maxcount``.

Note: tarproc's ``tarsplit -n`` meant samples per shard; that is ``--maxcount`` here.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from ..errors import ConfigError
from ._common import (
    CommandError,
    Progress,
    dataset_samples,
    describe,
    examples,
    expand_inputs,
    key_rule,
    message,
    plural,
    positive_int,
)
from ._output import SampleOutput, add_output_options, is_pattern, shard_name

__all__ = ["register", "run"]

EXAMPLES = examples(
    "shardstream split dataset.tar -n 4 -o 'part-%06d.tar'",
    "shardstream reshard shards-*.tar --maxcount 5 -o 'small/small-%06d.tar'",
    "shardstream split dataset.tar --maxsize 64K -o 'sized-{shard:04d}.tar'",
    "cat dataset.tar | shardstream split - --maxcount 7 -o 'stdin-%06d.tar'",
)

#: -n above this many shards is refused when the open-file limit cannot be read
_MAX_OPEN = 1000


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "split", aliases=["reshard"], parents=[parents["common"], parents["read"]],
        help="rewrite a dataset into N shards or shards of a given count/size",
        description=describe(__doc__), epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="shards: paths, URLs, brace patterns, '-' (stdin)")
    add_output_options(p)
    p.add_argument("-n", "--shards", type=positive_int, metavar="N",
                   help="exactly N shards: sample i goes to shard i mod N (one pass, works on streams)")
    p.set_defaults(run=run)


def _open_limit() -> int:
    try:
        import resource
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
    inputs = expand_inputs(args.inputs)
    samples = dataset_samples(inputs, key_rule(args, lowercase=False))
    if args.shards is None:
        with SampleOutput(args.output, maxcount=args.maxcount, maxsize=args.maxsize, duplicates=args.duplicate_keys,
                          inputs=inputs) as out, Progress(args, desc="split") as bar:
            for sample in samples:
                out.write(sample)
                bar.update()
        message(args, out.summary())
        return 0
    if args.shards > _open_limit():
        raise CommandError(f"-n {args.shards} would open more files than allowed at once ({_open_limit()}); "
                           "use --maxcount or --maxsize instead", code=2)
    with contextlib.ExitStack() as stack:
        outputs = [
            stack.enter_context(SampleOutput(shard_name(args.output, i), duplicates=args.duplicate_keys, inputs=inputs))
            for i in range(args.shards)
        ]
        total = 0
        with Progress(args, desc="split") as bar:
            for total, sample in enumerate(samples, 1):
                outputs[(total - 1) % args.shards].write(sample)
                bar.update()
    message(args, f"wrote {plural(total, 'sample')} to {plural(args.shards, 'shard')} ({args.output})")
    return 0
