"""``shuffle -j N``: the same permutation as one process, with the reading, scattering and sorting on N processes.

The order of ``shardstream shuffle`` is the samples sorted by ``(random number, position)``, the numbers drawn
from ``random.Random(seed)`` in input order. In parallel:

1. the samples of each input shard are counted (in parallel), and the main process draws every number in input
   order (8 bytes a sample, in a temporary file);
2. each input shard is scattered (in parallel) into ``buckets`` temporary tars by ranges of the numbers;
3. each bucket is gathered from all scatters and sorted (in parallel, through the external sort of
   :mod:`.shuffle` when it does not fit in ``memory / N``) into one sorted temporary tar;
4. the main process writes the sorted buckets in order through the usual output: the bytes are those of one
   process, whatever N.

Only local shards are read in parallel (streams such as ``-`` or ``pipe:`` can be read once: those stay on one
process). The temporary shards need about twice the size of the dataset on disk.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterator
from itertools import accumulate, chain
from typing import Any

import numpy as np

from ..samples import KeyRule
from ..writer import TarWriter
from ._bucketsort import RAW_RULE, Sorter, read_bucket
from ._common import local_path, shard_samples
from ._parallel import count_samples, ordered_map

__all__ = ["can_shuffle_in_parallel", "parallel_shuffled"]

_SPAN = 1 << 64


def can_shuffle_in_parallel(inputs: list[str], workers: int) -> bool:
    """Whether ``-j`` applies: more than one worker and every input a local file."""
    return workers > 1 and all(local_path(u) is not None and os.path.isfile(local_path(u) or "") for u in inputs)


def _edges(buckets: int) -> list[int]:
    """Bucket ``j`` holds the numbers ``n`` with ``n * buckets >> 64 == j``: ``[edges[j], edges[j + 1])``."""
    return [-(-(j << 64) // buckets) for j in range(buckets + 1)]


def _scatter(url: str, rule: KeyRule, numbers_path: str, first: int, count: int, buckets: int, directory: str,
             shard: int) -> list[int]:
    """Write the samples of one input shard into per-bucket tars; the samples per bucket."""
    numbers: np.ndarray | list[int] = (
        np.memmap(numbers_path, dtype=np.uint64, mode="r", offset=8 * first, shape=(count,)) if count else [])
    writers: dict[int, TarWriter] = {}
    counts = [0] * buckets
    try:
        for position, sample in enumerate(shard_samples(url, rule)):
            number = int(numbers[position])
            bucket = (number * buckets) >> 64
            writer = writers.get(bucket)
            if writer is None:
                path = os.path.join(directory, f"scatter-{bucket:05d}-{shard:06d}.tar")
                writer = writers[bucket] = TarWriter(path, encoder=False, keep_meta=True)
            fields = {k: v for k, v in sample.items() if k not in ("__key__", "__url__")}
            writer.write({"__key__": f"{number:016x}{first + position:016x}", "__origkey__": sample["__key__"],
                          **fields})
            counts[bucket] += 1
        for w in writers.values():
            w.close()
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    return counts


def _sort_bucket(bucket: int, shards: int, buckets: int, directory: str, memory: int) -> str:
    """Gather one bucket from every scatter, sort it, write it as one tar (keys kept in ``__origkey__``)."""

    paths = [p for p in (os.path.join(directory, f"scatter-{bucket:05d}-{s:06d}.tar") for s in range(shards))
             if os.path.exists(p)]
    edges = _edges(buckets)
    target = os.path.join(directory, f"sorted-{bucket:05d}.tar")
    sorter = Sorter(memory, 64, directory)
    try:
        with TarWriter(target, encoder=False, keep_meta=True) as sink:
            items = chain.from_iterable(read_bucket(p) for p in paths)
            for n, sample in enumerate(sorter.sort(items, edges[bucket], edges[bucket + 1])):
                fields = {k: v for k, v in sample.items() if k != "__key__"}
                sink.write({"__key__": f"{n:016x}", "__origkey__": sample["__key__"], **fields})
    finally:
        sorter.cleanup()
        for p in paths:
            os.unlink(p)
    return target


def _read_sorted(path: str) -> Iterator[dict[str, Any]]:

    for sample in shard_samples(path, RAW_RULE):
        del sample["__key__"], sample["__url__"]
        key = sample.pop("__origkey__").decode("utf-8")
        yield {"__key__": key, **sample}


def parallel_shuffled(inputs: list[str], rule: KeyRule, seed: int, *, memory: int, buckets: int, workers: int,
                      tmpdir: str | None = None) -> Iterator[dict[str, Any]]:
    """The samples of ``inputs`` in the order of :func:`~shardstream.cli.shuffle.shuffled` (see the module
    docstring)."""
    counts = list(ordered_map(count_samples, [(u, rule) for u in inputs], workers=workers))
    firsts = [0, *accumulate(counts)]
    buckets = max(buckets, 2 * workers)
    with tempfile.TemporaryDirectory(prefix="shardstream-pshuffle-", dir=tmpdir) as directory:
        numbers_path = os.path.join(directory, "numbers.u64")
        rng = random.Random(seed)
        np.fromiter((rng.getrandbits(64) for _ in range(firsts[-1])), dtype=np.uint64,
                    count=firsts[-1]).tofile(numbers_path)
        jobs = [(u, rule, numbers_path, firsts[s], counts[s], buckets, directory, s) for s, u in enumerate(inputs)]
        for _ in ordered_map(_scatter, jobs, workers=workers):
            pass
        sorts = [(b, len(inputs), buckets, directory, max(1 << 20, memory // workers)) for b in range(buckets)]
        for path in ordered_map(_sort_bucket, sorts, workers=workers):
            try:
                yield from _read_sorted(path)
            finally:
                os.unlink(path)
