"""``shardstream cat``: concatenate datasets into one tar stream or new shards; ``--mix`` interleaves them.

Each INPUT argument is one dataset: a shard, or a brace pattern of shards read in order
(``'data-{000..009}.tar'``). Without ``--mix`` the datasets follow one another; with ``--mix`` each next sample
comes from a dataset picked at random (seeded, ``--seed``, default 0) among those that still have samples, so
every order is reproducible. ``-o -`` writes one tar to standard output, for pipes such as
``shardstream cat a.tar b.tar -o - | shardstream split - -n 32 -o 'out-%06d.tar'`` (tarproc's
``tarscat | tarsplit``). Samples are copied byte for byte. ``--spec FILE`` reads a dataset spec (YAML/JSON, see
docs/specs.md) instead of INPUTs: one epoch (``--epoch``, default 0) of its exact mix, in order
(``shardstream cat --spec mix.yaml --epoch 3 -o 'epoch3-%06d.tar'``).

>>> import random
>>> list(mix([iter("aaaa"), iter("bb")], random.Random(0)))
['b', 'b', 'a', 'a', 'a', 'a']
"""

from __future__ import annotations

import argparse
import itertools
import random
from collections.abc import Iterator
from typing import Any

from ..errors import ConfigError
from ._common import Progress, dataset_samples, describe, examples, expand_inputs, key_rule, message
from ._output import SampleOutput, add_output_options

__all__ = ["mix", "register", "run"]

EXAMPLES = examples(
    "shardstream cat a.tar b.tar -o ab.tar",
    "shardstream cat a.tar b.tar --mix --seed 1 -o 'mixed-%06d.tar' --maxcount 8",
    "shardstream cat a.tar a.tar --duplicate-keys rename -o twice.tar",
    "shardstream cat a.tar 'pipe:cat b.tar' -o - | shardstream split - -n 4 -o 'part-%06d.tar'",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "cat", parents=[parents["common"], parents["read"]], help="concatenate or mix datasets",
        description=describe(__doc__), epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="datasets: paths, URLs, brace patterns, '-' (stdin)")
    p.add_argument("--spec", metavar="FILE", help="a dataset spec (YAML/JSON) instead of INPUTs: one epoch of its mix")
    p.add_argument("--epoch", type=int, default=0, help="the epoch of --spec to write (default 0)")
    add_output_options(p)
    p.add_argument("--mix", action="store_true", help="interleave the datasets in a random (seeded) order")
    p.add_argument("--seed", type=int, help="random seed of --mix (default 0)")
    p.set_defaults(run=run)


def mix(iterators: list[Iterator[Any]], rng: random.Random) -> Iterator[Any]:
    """Interleave ``iterators``: each next item comes from one picked at random among those not exhausted."""
    active = list(iterators)
    while active:
        i = rng.randrange(len(active))
        try:
            yield next(active[i])
        except StopIteration:
            del active[i]


def _spec_samples(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    from ..spec import spec_pipeline

    if args.inputs or args.mix:
        raise ConfigError("--spec replaces INPUTs and --mix: the spec says what to mix")
    mixed = spec_pipeline(args.spec, seed=args.seed)
    mixed.set_epoch(args.epoch)
    return iter(mixed)


def run(args: argparse.Namespace) -> int:
    if args.spec is not None:
        with SampleOutput(args.output, maxcount=args.maxcount, maxsize=args.maxsize,
                          duplicates=args.duplicate_keys) as out, Progress(args, desc="cat") as bar:
            for sample in _spec_samples(args):
                out.write(sample)
                bar.update()
        message(args, out.summary())
        return 0
    if not args.inputs:
        raise ConfigError("cat needs INPUT datasets (or --spec FILE)")
    if args.seed is not None and not args.mix:
        raise ConfigError("--seed needs --mix (or --spec)")
    datasets = [expand_inputs([arg]) for arg in args.inputs]
    expand_inputs([url for urls in datasets for url in urls])  # '-' at most once, over all inputs
    rule = key_rule(args, lowercase=False)
    streams = [dataset_samples(urls, rule) for urls in datasets]
    samples = mix(streams, random.Random(args.seed or 0)) if args.mix else itertools.chain(*streams)
    inputs = [url for urls in datasets for url in urls]
    with SampleOutput(args.output, maxcount=args.maxcount, maxsize=args.maxsize, duplicates=args.duplicate_keys,
                      inputs=inputs) as out, Progress(args, desc="cat") as bar:
        for sample in samples:
            out.write(sample)
            bar.update()
    message(args, out.summary())
    return 0
