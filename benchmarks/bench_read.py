"""Raw iteration (no decoding) of small and 4 MiB samples: shardstream next to webdataset and `cat`.

    .venv-bench/bin/python benchmarks/bench_read.py

Goals (issue 2): small samples >= 20x webdataset's samples/s; 4 MiB samples >= 0.8 of `cat > /dev/null`.
Issue 7: 4 MiB samples >= litdata's mmap views (at least `cat`): ``WebDataset(..., zero_copy=True)`` hands out
memoryviews into the memory-mapped shard instead of copies.
"""

from __future__ import annotations

import warnings

from _common import big_shards, cat_seconds, have, small_shards, table, timed, warm

import shardstream
from shardstream.samples import group_samples
from shardstream.tar import accelerated, iter_tar


def ours_raw(paths: list[str]) -> int:
    n = 0
    for p in paths:
        with open(p, "rb") as f:
            for _ in group_samples(iter_tar(f, p), p):
                n += 1
    return n


def ours_dataset(paths: list[str]) -> int:
    return sum(1 for _ in shardstream.WebDataset(paths, shardshuffle=False))


def ours_zero_copy(paths: list[str]) -> int:
    return sum(1 for _ in shardstream.WebDataset(paths, shardshuffle=False, zero_copy=True))


def ours_zero_copy_touched(paths: list[str]) -> int:
    """zero_copy, reading one byte of every 4 KiB page of every field: what mapping costs once data is used."""
    n = 0
    for sample in shardstream.WebDataset(paths, shardshuffle=False, zero_copy=True):
        for k, v in sample.items():
            if k[:2] != "__":
                bytes(v[::4096])
        n += 1
    return n


def webdataset_raw(paths: list[str]) -> int:
    import webdataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sum(1 for _ in webdataset.WebDataset(paths, shardshuffle=False))


def run(name: str, paths: list[str], per: str) -> None:
    nbytes = warm(paths)
    rows = []
    if have("webdataset"):
        t, n = timed(lambda: webdataset_raw(paths))
        rows.append(("webdataset 1.0.2 WebDataset", (n if per == "samples" else nbytes / 1e6) / t, per[:3]))
    t, n = timed(lambda: ours_raw(paths), repeat=2)
    rows.append(("shardstream iter_tar+group", (n if per == "samples" else nbytes / 1e6) / t, per[:3]))
    if hasattr(shardstream, "WebDataset"):
        t, n = timed(lambda: ours_dataset(paths), repeat=2)
        rows.append(("shardstream WebDataset", (n if per == "samples" else nbytes / 1e6) / t, per[:3]))
        t, n = timed(lambda: ours_zero_copy(paths), repeat=2)
        rows.append(("shardstream WebDataset(zero_copy=True)", (n if per == "samples" else nbytes / 1e6) / t, per[:3]))
        if per == "MB":
            t, n = timed(lambda: ours_zero_copy_touched(paths), repeat=2)
            rows.append(("  the same, one byte of every page read", nbytes / 1e6 / t, "MB"))
    if per == "MB":
        t = min(cat_seconds(paths) for _ in range(2))
        rows.append(("cat > /dev/null", nbytes / 1e6 / t, "MB"))
    baseline = "cat > /dev/null" if per == "MB" else ("webdataset 1.0.2 WebDataset" if have("webdataset") else rows[0][0])
    print(table(name, rows, baseline))
    print()


def main() -> None:
    print(f"C accelerator in use: {accelerated()}\n")
    run("raw iteration, 200k samples of ~250 B .txt + .cls (samples/s)", small_shards(), "samples")
    run("raw iteration, 4 MiB samples (MB/s)", big_shards(), "MB")


if __name__ == "__main__":
    main()
