"""Raw iteration (no decoding) of small and 4 MiB samples: shardstream next to webdataset and `cat`.

    .venv-bench/bin/python benchmarks/bench_read.py             # every row, then issue 17's two
    .venv-bench/bin/python benchmarks/bench_read.py --issue17   # only issue 17's two read rows

Goals (issue 2): small samples >= 20x webdataset's samples/s; 4 MiB samples >= 0.8 of `cat > /dev/null`.
Issue 7: 4 MiB samples >= litdata's mmap views (at least `cat`): ``WebDataset(..., zero_copy=True)`` hands out
memoryviews into the memory-mapped shard instead of copies.
Issue 17 (the two read rows, printed last): raw small samples through the default ``WebDataset(urls)`` >= 0.9M
samples/s; 4 MiB samples through the default copy path >= 0.8x the read limit (``cat > /dev/null``). Each is
printed from wall-clock time (best of 3) and from CPU time (``time.process_time``; ``cat``'s from
``RUSAGE_CHILDREN``), which a loaded machine disturbs much less.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
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


def _best(fn, repeat: int = 3) -> tuple[float, float, int]:
    """(best wall seconds, best CPU seconds, count) of ``repeat`` runs of ``fn``."""
    wall = cpu = float("inf")
    count = 0
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        count = fn()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return wall, cpu, count


def _cat(paths: list[str], repeat: int = 3) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds) of ``cat paths > /dev/null``: the read limit."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(["cat", *paths], stdout=subprocess.DEVNULL, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, cpu


def issue17_rows(small: list[str], big: list[str]) -> None:
    """The two read rows of issue 17, default API, wall and CPU."""
    print("## issue 17: the read rows through the default API (WebDataset(urls), fields as bytes)")
    warm(small)
    wall, cpu, n = _best(lambda: ours_dataset(small))
    print(f"raw small samples (200k x ~250 B)   {n / wall:>12,.0f} samples/s wall  {n / cpu:>12,.0f} samples/s CPU"
          "   goal >= 900,000")
    nbytes = warm(big)
    wall, cpu, _ = _best(lambda: ours_dataset(big))
    cat_wall, cat_cpu = _cat(big)
    print(f"4 MiB samples, default copy path    {nbytes / 1e6 / wall:>12,.0f} MB/s wall       "
          f"{nbytes / 1e6 / max(cpu, 1e-9):>12,.0f} MB/s CPU")
    print(f"read limit (cat > /dev/null)        {nbytes / 1e6 / cat_wall:>12,.0f} MB/s wall       "
          f"{nbytes / 1e6 / max(cat_cpu, 1e-9):>12,.0f} MB/s CPU")
    print(f"4 MiB default copy / read limit     {cat_wall / wall:>12.2f}x wall            "
          f"{cat_cpu / max(cpu, 1e-9):>12.2f}x CPU   goal >= 0.8x")


def main() -> None:
    print(f"C accelerator in use: {accelerated()}\n")
    small, big = small_shards(), big_shards()
    if "--issue17" not in sys.argv:
        run("raw iteration, 200k samples of ~250 B .txt + .cls (samples/s)", small, "samples")
        run("raw iteration, 4 MiB samples (MB/s)", big, "MB")
    issue17_rows(small, big)


if __name__ == "__main__":
    main()
