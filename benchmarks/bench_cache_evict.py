"""The shard cache's cost per download with N shards cached: does making room grow with N?

    python benchmarks/bench_cache_evict.py [--sizes 1000,10000] [--downloads 60] [--src DIR ...]

A fresh process per (source tree, N) fills a folder with N shards of 1 KB (``max_bytes`` = N KB), then downloads
``--downloads`` new ones through ``ShardCache`` (an in-memory opener that states each size), each evicting the
least recently used shard. It prints the eviction's milliseconds per download (``ShardCache.evict`` timed), the
whole download's, the first download's (it builds the index when the folder has none) and the lock files left.
``--src`` (repeatable) compares package trees, e.g. an older checkout's ``src``; the runs interleave, tree by tree
for each N, so the machine's load falls on both alike.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIZE = 1000


def child(count: int, downloads: int) -> dict:
    from shardstream.io import register_opener  # noqa: PLC0415 - from the tree under test
    from shardstream.io.cache import ShardCache  # noqa: PLC0415

    class Sized(io.BytesIO):
        size = SIZE

    register_opener("mem", lambda url: Sized(b"x" * SIZE))
    folder = tempfile.mkdtemp(prefix="bench-evict-")
    try:
        for i in range(count):
            path = os.path.join(folder, f"old-{i:06d}.tar")
            with open(path, "wb") as f:
                f.write(bytes(SIZE))
            os.utime(path, ns=(10**18 + i * 10**6,) * 2)
        cache = ShardCache(folder, max_bytes=count * SIZE)
        began = time.perf_counter()
        cache("mem://h/first.tar").close()
        first = time.perf_counter() - began
        evicting, real = [0.0], ShardCache.evict

        def timed(self: ShardCache, needed: int = 0) -> list[str]:
            began = time.perf_counter()
            try:
                return real(self, needed)
            finally:
                evicting[0] += time.perf_counter() - began

        ShardCache.evict = timed  # type: ignore[method-assign]
        began = time.perf_counter()
        for i in range(downloads):
            cache(f"mem://h/new-{i}.tar").close()
        whole = time.perf_counter() - began
        return {"first_ms": first * 1e3, "download_ms": whole / downloads * 1e3,
                "evict_ms": evicting[0] / downloads * 1e3, "locks": len(os.listdir(os.path.join(folder, ".locks")))}
    finally:
        shutil.rmtree(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="numbers of shards cached, comma-separated")
    parser.add_argument("--downloads", type=int, default=60, help="downloads timed at each size")
    parser.add_argument("--src", action="append", help="package trees to compare (default: this one's src)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*json.loads(args.child))))
        return 0
    trees = args.src or [str(ROOT / "src")]
    print("| tree | shards cached | eviction ms per download | download ms | first download ms | lock files left |")
    print("|---|---|---|---|---|---|")
    for count in (int(n) for n in args.sizes.split(",")):
        for tree in trees:
            out = subprocess.run([sys.executable, __file__, "--child", json.dumps([count, args.downloads])],
                                 env={**os.environ, "PYTHONPATH": tree}, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {tree} | {count:,} | {r['evict_ms']:.1f} | {r['download_ms']:.1f} | {r['first_ms']:.0f} | "
                  f"{r['locks']:,} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
