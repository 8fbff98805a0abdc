"""``shardstream shuffle``: rewrite a dataset in a globally shuffled order, seeded, in bounded memory.

How: every sample gets a random 64-bit number from the seeded generator (in input order), and the output is
the samples sorted by that number, a uniformly random permutation. When the samples fit in ``--memory`` they are
sorted in memory. Otherwise it is an external sort through temporary shards: the samples are scattered into
``--buckets`` temporary tars by ranges of their numbers, then each bucket is read back and sorted in memory (a
bucket that is still too large is scattered again). Memory stays near ``--memory`` (plus the largest sample),
the temporary shards (in ``--tmpdir``) need about the size of the dataset on disk, and each sample is read and
written twice. The order depends only on the input and ``--seed``, never on ``--memory`` or ``--buckets``:
the same input and seed give byte-identical output. ``-j N`` reads, scatters and sorts local shards on N
processes, with the same bytes as one process.

>>> data = [{"__key__": str(i), "x": b"0123456789"} for i in range(50)]
>>> in_memory = [s["__key__"] for s in shuffled(data, 2, memory=1 << 20)]
>>> external = [s["__key__"] for s in shuffled(data, 2, memory=600, buckets=3)]  # through temporary shards
>>> in_memory == external, sorted(in_memory) == sorted(s["__key__"] for s in data), in_memory[:4]
(True, True, ['9', '2', '26', '4'])
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Iterable, Iterator
from typing import Any

from ._bucketsort import Sorter
from ._common import Progress, dataset_samples, key_rule, local_path, parse_size, positive_int
from ._inputs import resolve_inputs
from ._options import add_inputs, command, examples
from ._output import SampleOutput, add_output_options, finish, output_options
from ._pshuffle import can_shuffle_in_parallel, parallel_shuffled

__all__ = ["register", "run", "shuffled"]

EXAMPLES = examples(
    "shardstream shuffle dataset.tar --seed 0 -o shuffled.tar",
    "shardstream shuffle shards-*.tar --seed 7 --memory 64K -o 'shuffled-%06d.tar' --maxcount 10",
    "cat dataset.tar | shardstream shuffle - --memory 16K --buckets 4 -o from-stdin.tar",
    "shardstream shuffle dataset.tar --seed 1 -o shuffled.tar --overwrite --json --quiet",
    "shardstream shuffle shards-*.tar --seed 3 -j 2 -o 'parallel/shuffled-%06d.tar' --maxcount 8",
)

_SPAN = 1 << 64


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "shuffle", "rewrite a dataset in a seeded shuffled order", __doc__, EXAMPLES)
    add_inputs(p)
    add_output_options(p, workers="processes to use (default 1): local shards are read, scattered and sorted "
                                     "in parallel; the output is the same for any N")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0): same input and seed, same bytes")
    p.add_argument("--memory", type=parse_size, default=parse_size("1G"), metavar="SIZE",
                   help="memory for samples before spilling to temporary shards (default 1G)")
    p.add_argument("--buckets", type=positive_int, metavar="K",
                   help="temporary shards per scatter pass (default: from the input size, or 64)")
    p.add_argument("--tmpdir", metavar="DIR", help="directory for the temporary shards (default: the system's)")
    p.set_defaults(run=run)


def shuffled(samples: Iterable[dict[str, Any]], seed: int, *, memory: int, buckets: int = 64,
             tmpdir: str | None = None) -> Iterator[dict[str, Any]]:
    """``samples`` in a seeded random order, in bounded memory (see the module docstring)."""
    rng = random.Random(seed)
    numbered = ((rng.getrandbits(64), i, s) for i, s in enumerate(samples))
    sorter = Sorter(memory, buckets, tmpdir)
    try:
        yield from sorter.sort(numbered, 0, _SPAN)
    finally:
        sorter.cleanup()


def _auto_buckets(inputs: list[str], memory: int) -> int:
    paths = [local_path(u) for u in inputs]
    if any(p is None for p in paths):
        return 64
    total = sum(os.path.getsize(p) for p in paths if p and os.path.isfile(p))
    return max(2, min(512, -(-2 * total // memory)))


def run(args: argparse.Namespace) -> int:
    inputs = resolve_inputs(args.inputs)
    buckets = args.buckets or _auto_buckets(inputs, args.memory)
    rule = key_rule(args, lowercase=False)
    if can_shuffle_in_parallel(inputs, args.workers):
        ordered = parallel_shuffled(inputs, rule, args.seed, memory=args.memory, buckets=buckets,
                                    workers=args.workers, tmpdir=args.tmpdir)
    else:
        ordered = shuffled(dataset_samples(inputs, rule), args.seed, memory=args.memory, buckets=buckets,
                           tmpdir=args.tmpdir)
    with SampleOutput(args.output, inputs=inputs, **output_options(args)) as out, \
            Progress(args, desc="shuffle") as bar:
        for sample in ordered:
            out.write(sample)
            bar.update()
    return finish(args, "shuffle", out.result(), out.summary())
