"""Random access: index build rate and random ``ds[i]`` from the page cache (shardstream.indexed).

Datasets (generated once in ``bench-data/``, see ``_common.py``): the small-sample dataset (default 200k samples
of a ~250 B ``.txt`` and a ``.cls``, 10k per shard) and a dataset of 8 KiB samples (one ``.bin``, default 40k).

Rows:
- index build, members/s: the header-only scan plus grouping into samples (:func:`index_shard`, not saved), with
  the C header walk and with the pure-Python walk; and loading saved sidecars (samples/s).
- ``ds[i]``, samples/s: uniformly random positions, fields as bytes (default), as zero-copy memoryviews, with the
  codec table (``decode=True``, small samples), and in a :class:`LocalitySampler` order.
- MosaicML Streaming's ``StreamingDataset[i]`` on 8 KiB samples was measured at ~104k samples/s on this project's
  machines; it is printed as a fixed reference row (``mosaicml-streaming`` is not a dependency).

    .venv/bin/python benchmarks/bench_indexed.py [--small 200000] [--medium 40000] [--reads 200000]
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import big_shards, small_shards, table, timed, warm

from shardstream.indexed import IndexedDataset, LocalitySampler, ShardIndex, index_dataset, index_shard
from shardstream.tar import accelerated

MOSAIC_8K = 104_000.0  # samples/s, StreamingDataset[i] on 8 KiB samples (measured separately, see the docstring)


REPEAT = 3  # best of: these machines are noisy


def build_rate(paths: list[str], accelerate: bool) -> float:
    seconds, members = timed(
        lambda: sum(len(index_shard(p, save=False, accelerate=accelerate).offsets) for p in paths), REPEAT
    )
    return members / seconds


def load_rate(paths: list[str]) -> float:
    seconds, samples = timed(lambda: sum(len(ShardIndex.load(p)) for p in paths), REPEAT)
    return samples / seconds


def read_rate(ds: IndexedDataset, positions: list[int]) -> float:
    for i in positions[:5000]:  # opens the shards' maps and indexes (once per process, not per read)
        ds[i]

    def run() -> int:
        for i in positions:
            ds[i]
        return len(positions)

    seconds, count = timed(run, REPEAT)
    return count / seconds


def bench(name: str, paths: list[str], reads: int, decode: bool) -> list[tuple[str, float, str]]:
    warm(paths)
    rows = []
    if accelerated():
        rows.append((f"{name}: index build, C walk", build_rate(paths, True), "m/s"))
    rows.append((f"{name}: index build, Python walk", build_rate(paths, False), "m/s"))
    index_dataset(paths, f"{paths[0]}.dataset.json")
    rows.append((f"{name}: load sidecars", load_rate(paths), "s/s"))
    ds = IndexedDataset(f"{paths[0]}.dataset.json")
    rng = np.random.default_rng(0)
    positions = rng.integers(0, len(ds), size=min(reads, 4 * len(ds))).tolist()
    rows.append((f"{name}: ds[i] random, bytes", read_rate(ds, positions), "s/s"))
    zero_copy = IndexedDataset(f"{paths[0]}.dataset.json", zero_copy=True)
    rows.append((f"{name}: ds[i] random, zero-copy", read_rate(zero_copy, positions), "s/s"))
    if decode:
        rows.append((f"{name}: ds[i] random, decoded", read_rate(ds.decode(), positions), "s/s"))
    order = list(LocalitySampler(ds, window=4, seed=0))[: len(positions)]
    rows.append((f"{name}: ds[i] LocalitySampler", read_rate(ds, order), "s/s"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200_000, help="samples of the small-sample dataset")
    parser.add_argument("--medium", type=int, default=40_000, help="samples of the 8 KiB dataset")
    parser.add_argument("--reads", type=int, default=200_000, help="random reads per row")
    args = parser.parse_args()

    small = bench("250 B", small_shards(args.small, 10_000), args.reads, decode=True)
    medium = bench("8 KiB", big_shards(args.medium, 8192, 10_000), args.reads, decode=False)
    medium.append(("8 KiB: MosaicML Streaming ds[i] (reference)", MOSAIC_8K, "s/s"))
    print(table("index build (m/s: members/s) and sidecar loads (s/s: samples/s)", small[:3] + medium[:3],
                small[0][0]))  # fmt: skip
    print()
    print(table("random access, samples/s", small[3:] + medium[3:], "8 KiB: MosaicML Streaming ds[i] (reference)"))


if __name__ == "__main__":
    main()
