"""``shardstream cat``: concatenate datasets into one tar stream or new shards; ``--mix`` interleaves them.

Each INPUT argument is one dataset, its shards read in order: a shard, a directory of shards, a glob, a brace
pattern (``'data-{000..009}.tar'``) or a dataset spec (all the shards of its sources). Without ``--mix`` the datasets follow one another; with ``--mix`` each next sample
comes from a dataset picked at random (seeded, ``--seed``, default 0) among those that still have samples, with
probabilities proportional to ``--weights`` (default: equal), so every order is reproducible. ``--skip N``,
``--count N`` and ``--slice START:STOP[:STEP]`` then select from the resulting stream (as ``itertools.islice``).
``-o -`` writes one tar to standard output, for pipes such as
``shardstream cat a.tar b.tar -o - | shardstream split - -n 32 -o 'out-%06d.tar'`` (tarproc's
``tarscat | tarsplit``). Samples are copied byte for byte. ``--spec FILE`` reads a dataset spec (YAML/JSON, see
docs/specs.md) instead of INPUTs: one epoch (``--epoch``, default 0) of its exact mix, in order
(``shardstream cat --spec mix.yaml --epoch 3 -o 'epoch3-%06d.tar'``).

>>> import random
>>> list(mix([iter("aaaa"), iter("bb")], random.Random(0)))
['b', 'b', 'a', 'a', 'a', 'a']
>>> "".join(mix([iter("a" * 20), iter("b" * 20)], random.Random(0), [9, 1]))[:20].count("b") < 5
True
>>> parse_slice("10:20:2"), parse_slice("5:")
((10, 20, 2), (5, None, 1))
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ConfigError
from ._common import Progress, dataset_samples, key_rule
from ._inputs import resolve_inputs
from ._options import add_inputs, command, examples
from ._output import SampleOutput, add_output_options, finish, output_options

__all__ = ["mix", "parse_slice", "register", "run"]

EXAMPLES = examples(
    "shardstream cat a.tar b.tar -o ab.tar",
    "shardstream cat a.tar b.tar --mix --seed 1 -o 'mixed-%06d.tar' --maxcount 8",
    "shardstream cat a.tar b.tar --mix --weights 3,1 --count 8 -o weighted.tar --json",
    "shardstream cat dataset.tar --slice 2:12:2 -o every-other.tar",
    "shardstream cat a.tar a.tar --duplicate-keys rename -o twice.tar",
    "shardstream cat a.tar 'pipe:cat b.tar' -o - | shardstream split - -n 4 -o 'part-%06d.tar'",
)


def parse_slice(text: str) -> tuple[int, int | None, int]:
    """``START:STOP[:STEP]`` (parts may be empty) -> ``(start, stop, step)``; no negative numbers."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p == "" or p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not START:STOP[:STEP] with non-negative integers")
    start = int(parts[0] or 0)
    stop = int(parts[1]) if parts[1] else None
    step = int(parts[2]) if len(parts) == 3 and parts[2] else 1
    if step < 1:
        raise argparse.ArgumentTypeError(f"slice step must be at least 1, got {text!r}")
    return start, stop, step


def _weights(text: str) -> list[float]:
    try:
        values = [float(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not comma-separated numbers, e.g. 3,1") from None
    if any(not w > 0 for w in values):
        raise argparse.ArgumentTypeError(f"weights must be positive, got {text!r}")
    return values


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "cat", "concatenate or mix datasets", __doc__, EXAMPLES,
                usage="%(prog)s INPUT [INPUT ...] -o OUT [options]\n       %(prog)s --spec FILE -o OUT [options]")
    add_inputs(p, nargs="*")
    p.add_argument("--spec", metavar="FILE", help="a dataset spec (YAML/JSON) instead of INPUTs: one epoch of its mix")
    p.add_argument("--epoch", type=int, default=0, help="the epoch of --spec to write (default 0)")
    add_output_options(p)
    p.add_argument("--mix", action="store_true", help="interleave the datasets in a random (seeded) order")
    p.add_argument("--weights", type=_weights, metavar="W,...",
                   help="with --mix: one weight per INPUT (e.g. 3,1: three samples of the first for one of the second)")
    p.add_argument("--seed", type=int, help="random seed of --mix (default 0)")
    p.add_argument("--skip", type=int, default=0, metavar="N", help="skip the first N samples of the stream")
    p.add_argument("--count", type=int, metavar="N", help="write at most N samples")
    p.add_argument("--slice", type=parse_slice, metavar="START:STOP[:STEP]",
                   help="samples START, START+STEP... before STOP of the stream (instead of --skip/--count)")
    p.set_defaults(run=run)


def mix(iterators: list[Iterator[Any]], rng: random.Random, weights: Sequence[float] | None = None) -> Iterator[Any]:
    """Interleave ``iterators``: each next item comes from one picked at random among those not exhausted, with
    probability proportional to its weight (default: equal)."""
    active = list(iterators)
    w = list(weights) if weights is not None else [1.0] * len(active)
    while active:
        if weights is None:
            i = rng.randrange(len(active))
        else:
            cumulative = list(itertools.accumulate(w))
            i = min(bisect.bisect_right(cumulative, rng.random() * cumulative[-1]), len(active) - 1)
        try:
            yield next(active[i])
        except StopIteration:
            del active[i], w[i]


def _spec_samples(args: argparse.Namespace) -> Iterator[dict[str, Any]]:

    if args.inputs or args.mix:
        raise ConfigError("--spec replaces INPUTs and --mix: the spec says what to mix")
    from ..spec import spec_pipeline  # noqa: PLC0415 - the spec builder pulls in torch (~2 s): only --spec needs it

    mixed = spec_pipeline(args.spec, seed=args.seed)
    mixed.set_epoch(args.epoch)
    return iter(mixed)


def run(args: argparse.Namespace) -> int:
    if args.spec is None and not args.inputs:
        raise ConfigError("cat needs INPUT datasets (or --spec FILE)")
    if args.seed is not None and not (args.mix or args.spec):
        raise ConfigError("--seed needs --mix (or --spec)")
    if args.weights is not None and not args.mix:
        raise ConfigError("--weights needs --mix")
    if args.weights is not None and len(args.weights) != len(args.inputs):
        raise ConfigError(f"--weights gives {len(args.weights)} weights for {len(args.inputs)} inputs; give one each")
    if args.slice is not None and (args.skip or args.count is not None):
        raise ConfigError("--slice cannot be combined with --skip/--count")
    if args.skip < 0 or (args.count is not None and args.count < 0):
        raise ConfigError("--skip and --count must not be negative")
    if args.spec is not None:
        return _write(args, _spec_samples(args), [])
    datasets = [resolve_inputs([arg]) for arg in args.inputs]
    resolve_inputs([url for urls in datasets for url in urls])  # '-' at most once, over all inputs
    rule = key_rule(args, lowercase=False)
    streams = [dataset_samples(urls, rule) for urls in datasets]
    samples = (mix(streams, random.Random(args.seed or 0), args.weights) if args.mix
               else itertools.chain(*streams))
    return _write(args, samples, [url for urls in datasets for url in urls])


def _write(args: argparse.Namespace, samples: Iterator[Any], inputs: list[str]) -> int:
    if args.slice is not None:
        samples = itertools.islice(samples, *args.slice)
    elif args.skip or args.count is not None:
        samples = itertools.islice(samples, args.skip, None if args.count is None else args.skip + args.count)
    with SampleOutput(args.output, inputs=inputs, **output_options(args)) as out, Progress(args, desc="cat") as bar:
        for sample in samples:
            out.write(sample)
            bar.update()
    return finish(args, "cat", out.result(), out.summary())
