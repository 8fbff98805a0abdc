"""Shard writing throughput: shardstream's ShardWriter, and webdataset's side by side when it is installed.

Two workloads, both with already-encoded fields (bytes pass through every encoder untouched):

- small: 200k samples of ~250 B ``.txt`` + a 1-byte ``.cls`` (caption/label datasets: header-bound);
- large: 200 samples of 4 MiB ``.bin`` (image/video datasets: copy-bound);
- many shards: 20k small samples, 100 per shard (the per-shard cost: 200 renames, each with its fsyncs).

shardstream runs twice, with ``fsync=True`` (the default: each finished shard and its directory are flushed to
disk around the rename, so a power loss never leaves a short shard under its final name) and ``fsync=False``;
the "fsync cost" line is the ratio of their times.

For each: samples/s, MB/s of output, and the output size against the minimal tar size (512-byte header per
member, data padded to 512, two zero blocks per shard). Files go to a temporary directory, removed afterwards.

    .venv/bin/python benchmarks/bench_write.py            # shardstream only (webdataset is not in .venv)
    .venv-bench/bin/python benchmarks/bench_write.py      # side by side with webdataset 1.0.2
    .venv/bin/python benchmarks/bench_write.py --small 20000 --large 20 --repeat 3
    .venv/bin/python benchmarks/bench_write.py --fsync off   # only the fsync=False row
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable

from shardstream import writer as ss_writer

try:
    import webdataset
except ImportError:  # only installed in .venv-bench
    webdataset = None

MAXCOUNT = 100_000
MAXSIZE = 256e6


def small_samples(n: int) -> list[dict]:
    rng = random.Random(0)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    out = []
    for i in range(n):
        text = b" ".join(rng.choice(words) for _ in range(45))[:250]
        out.append({"__key__": f"sample{i:08d}", "txt": text, "cls": b"%d" % (i % 1000)})
    return out


def large_samples(n: int) -> list[dict]:
    blobs = [os.urandom(4 << 20) for _ in range(4)]  # distinct buffers, reused: generation is not timed
    return [{"__key__": f"video{i:06d}", "bin": blobs[i % 4]} for i in range(n)]


def minimal_tar_size(samples: list[dict], shards: int) -> int:
    size = 0
    for sample in samples:
        for name, value in sample.items():
            if not name.startswith("__"):
                size += 512 + len(value) + (-len(value) % 512)
    return size + 1024 * shards


def shardstream_writer(fsync: bool, maxcount: int = MAXCOUNT) -> Callable[[str, list], None]:
    def run(pattern: str, samples: list[dict]) -> None:
        with ss_writer.ShardWriter(pattern, maxcount=maxcount, maxsize=MAXSIZE, fsync=fsync) as sink:
            for sample in samples:
                sink.write(sample)

    return run


def run_webdataset(pattern: str, samples: list[dict]) -> None:
    with webdataset.ShardWriter(pattern, maxcount=MAXCOUNT, maxsize=MAXSIZE, verbose=0) as sink:
        for sample in samples:
            sink.write(sample)


def measure(run: Callable[[str, list], None], samples: list[dict], root: str, repeat: int) -> tuple[float, int, int]:
    """Best wall time over ``repeat`` runs, output bytes and shard count."""
    best = float("inf")
    for _ in range(repeat):
        directory = tempfile.mkdtemp(dir=root)
        try:
            start = time.perf_counter()
            run(os.path.join(directory, "shard-%06d.tar"), samples)
            best = min(best, time.perf_counter() - start)
            files = [os.path.join(directory, f) for f in os.listdir(directory)]
            nbytes, shards = sum(os.path.getsize(f) for f in files), len(files)
        finally:
            shutil.rmtree(directory)
    return best, nbytes, shards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=200_000, help="number of small samples")
    parser.add_argument("--large", type=int, default=200, help="number of 4 MiB samples")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the best time is kept")
    parser.add_argument("--many", type=int, default=20_000, help="number of small samples, 100 per shard")
    parser.add_argument("--fsync", choices=("both", "on", "off"), default="both", help="shardstream's fsync rows")
    parser.add_argument("--dir", default=None, help="where to write (default: the system temp directory)")
    args = parser.parse_args()

    writers = [(f"shardstream{suffix}", flag) for suffix, flag in (("", True), (" no fsync", False))
               if args.fsync == "both" or (args.fsync == "on") == flag]
    if webdataset is not None:
        writers.append((f"webdataset {webdataset.__version__}", None))
    else:
        print("(webdataset is not importable here: run with .venv-bench/bin/python for the comparison)\n")

    header = (
        f"{'workload':<26} {'writer':<18} {'seconds':>8} {'samples/s':>11} {'MB/s':>8} {'size/min':>9} {'shards':>6}"
    )
    print(header)
    print("-" * len(header))
    root = tempfile.mkdtemp(dir=args.dir, prefix="bench_write-")
    try:
        for label, make, n, maxcount in (
            (f"small {args.small} x ~250 B", small_samples, args.small, MAXCOUNT),
            (f"large {args.large} x 4 MiB", large_samples, args.large, MAXCOUNT),
            (f"many shards {args.many} / 100", small_samples, args.many, 100),
        ):
            if n <= 0:
                continue
            samples = make(n)
            results = {}
            for name, fsync in writers:
                run = run_webdataset if fsync is None else shardstream_writer(fsync, maxcount)
                if fsync is None and maxcount != MAXCOUNT:
                    continue
                seconds, nbytes, shards = measure(run, samples, root, args.repeat)
                ratio = nbytes / minimal_tar_size(samples, shards)
                results[name] = seconds
                print(
                    f"{label:<26} {name:<18} {seconds:8.2f} {n / seconds:11,.0f} {nbytes / seconds / 1e6:8.0f} "
                    f"{ratio:9.4f} {shards:6d}"
                )
            if "shardstream" in results and "shardstream no fsync" in results:
                cost = results["shardstream"] / results["shardstream no fsync"]
                print(f"{'':<26} {'fsync cost':<18} {cost:7.2f}x")
            theirs = next((t for name, t in results.items() if name.startswith("webdataset")), None)
            if theirs is not None and "shardstream" in results:
                print(f"{'':<26} {'speedup':<18} {theirs / results['shardstream']:7.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
