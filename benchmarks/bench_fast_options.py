"""The fast options of docs/performance.md ("Choosing the fast options"), each next to the default it replaces.

    .venv-bench/bin/python benchmarks/bench_fast_options.py [--quick] [--rounds N] [--only GROUP ...]

Groups (``GROUPS``), each on its own data (benchmarks/_common.py, page cache warm):

- ``batches``: txt+cls batches of 256 from 200k samples of ~250 B; the default is the README idiom
  ``.decode().to_tuple("txt", "cls").batched(256)`` (fused: decoded in the C walk).
- ``jpeg``: 2,000 JPEGs of 500x375 -> 224x224 RGB, batches of 64; the default is ``.map(load)`` with the exact
  ``decode_resized``. Threads and the scaled decode need the second core and the ``jpeg`` extra.
- ``large``: 128 samples of 4 MiB; the default hands out ``bytes``. Two consumers: one that reads every field
  whole (one byte of every 4 KiB page, which faults in every page of a view) and one that keeps a few bytes of
  each field (``len()`` and its first 64 bytes).

Every contender of a group is built once, then ``--rounds`` rounds run each in turn (the order rotates), a cell
being the best of ``--passes`` passes; each round gives every option's ratio to the default of that round, and the
table shows the median ratio with its range, from wall-clock rates and from rates per CPU-second of the process
(which a loaded machine moves much less; for the threads row only the wall ratio means anything, and only with a
second core free). ``--rss`` adds the RSS of holding every field of the large
group (a fresh interpreter per variant; Linux).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from _common import big_shards, have, jpeg_shards, small_shards, warm

SIZE = 224


def _rows(batches) -> int:
    n = 0
    for b in batches:
        first = b[0] if isinstance(b, (list, tuple)) else next(iter(b.values()))
        n += len(first)
    return n


def batches_group(quick: bool) -> dict[str, Callable[[], int]]:
    import shardstream as wds
    from shardstream.codecs import Decoder
    from shardstream.indexed import IndexedDataset, index_shard, sidecar_path
    from shardstream.pipeline import tarfile_to_columns

    paths = small_shards(20_000 if quick else 200_000)
    warm(paths)
    for p in paths:  # the sidecar indexes: written once, untimed (as a conversion is)
        if not os.path.exists(sidecar_path(p)):
            index_shard(p)
    default = wds.WebDataset(paths, shardshuffle=False).decode().to_tuple("txt", "cls").batched(256)
    columns = wds.DataPipeline(wds.SimpleShardList(paths), tarfile_to_columns(256), wds.map(Decoder().decode_columns))
    reader = wds.DataPipeline(wds.SimpleShardList(paths), tarfile_to_columns(256, decode=Decoder()))
    indexed = IndexedDataset(paths, decode=True)
    return {
        'default: .decode().to_tuple("txt", "cls").batched(256)': lambda: _rows(default),
        "tarfile_to_columns(256) + map(Decoder().decode_columns)": lambda: _rows(columns),
        "tarfile_to_columns(256, decode=Decoder())": lambda: _rows(reader),
        "IndexedDataset(decode=True).columns(256) (sidecar indexes)": lambda: _rows(indexed.columns(256)),
    }


def jpeg_group(quick: bool) -> dict[str, Callable[[], int]]:
    import shardstream as wds
    from shardstream.codecs import decode_resized
    from shardstream.pipeline import parallel_map

    paths = jpeg_shards(256, per_shard=64) if quick else jpeg_shards(2000)
    warm(paths)

    def load(sample):
        return decode_resized(sample["jpg"], SIZE), int(sample["cls"])

    def load_scaled(sample):
        return decode_resized(sample["jpg"], SIZE, scaled=True), int(sample["cls"])

    def dataset():
        return wds.WebDataset(paths, shardshuffle=False)

    default = dataset().map(load).batched(64)
    threads = dataset().compose(parallel_map(load, workers=2)).batched(64)
    out = {"default: .map(load).batched(64), exact decode_resized": lambda: _rows(default),
           ".compose(parallel_map(load, workers=2)).batched(64)": lambda: _rows(threads)}
    if have("simplejpeg") and have("cv2"):
        scaled = dataset().map(load_scaled).batched(64)
        out["decode_resized(..., scaled=True) (not pixel-exact)"] = lambda: _rows(scaled)
    else:
        print("jpeg: scaled=True skipped (pip install 'shardstream[jpeg]')", file=sys.stderr)
    return out


def _read_all(field) -> int:
    sum(field[::4096])  # one byte of every page: every page of a view is faulted in
    return len(field)


def _read_head(field) -> int:
    sum(field[:64])
    return len(field)


def large_group(quick: bool) -> dict[str, Callable[[], int]]:
    import shardstream as wds

    paths = big_shards(32 if quick else 128)
    warm(paths)
    copies = wds.WebDataset(paths, shardshuffle=False)
    views = wds.WebDataset(paths, shardshuffle=False, zero_copy=True)
    return {
        "default (bytes), reading every page": lambda: sum(_read_all(s["bin"]) for s in copies),
        "zero_copy=True, reading every page": lambda: sum(_read_all(s["bin"]) for s in views),
        "default (bytes), reading 64 bytes a field": lambda: sum(_read_head(s["bin"]) for s in copies),
        "zero_copy=True, reading 64 bytes a field": lambda: sum(_read_head(s["bin"]) for s in views),
    }


GROUPS = {"batches": batches_group, "jpeg": jpeg_group, "large": large_group}
# large: each zero_copy row is compared with the default row of the same consumer just above it
PAIRS = {"large": {1: 0, 2: 2, 3: 2}}


def measure(contenders: dict[str, Callable[[], int]], rounds: int, passes: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) rates (items per second and per CPU-second of the process, best of ``passes``) per contender and
    round, the order rotating between rounds."""
    names = list(contenders)
    rates: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for name in names:  # one untimed pass each: imports, pools, lazily built state
        contenders[name]()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            wall = cpu = 0.0
            for _ in range(passes):
                w, c = time.perf_counter(), time.process_time()
                count = contenders[name]()
                w, c = time.perf_counter() - w, time.process_time() - c
                wall, cpu = max(wall, count / w), max(cpu, count / max(c, 1e-9))
            rates[name].append((wall, cpu))
    return rates


def _ratio(values: list[float], bases: list[float]) -> str:
    ratios = [a / b for a, b in zip(values, bases, strict=True)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def report(group: str, rates: dict[str, list[tuple[float, float]]], unit: str) -> str:
    names = list(rates)
    width = max(len(n) for n in names)
    lines = [f"## {group}: {unit}, median of {len(rates[names[0]])} rounds; ratio to the default of each round, "
             "wall clock and per CPU-second (threads: read the wall ratio, on free cores)",
             f"{'':{width}}  {'rate':>12}  {'wall ratio (range)':>22}  {'CPU ratio (range)':>22}"]
    base_of = PAIRS.get(group, {})
    for i, name in enumerate(names):
        base = names[base_of.get(i, 0)]
        wall, cpu = [r[0] for r in rates[name]], [r[1] for r in rates[name]]
        row = f"{name:{width}}  {statistics.median(wall):>12,.0f}"
        if name != base:
            row += f"  {_ratio(wall, [r[0] for r in rates[base]]):>22}  {_ratio(cpu, [r[1] for r in rates[base]]):>22}"
        lines.append(row)
    return "\n".join(lines)


RSS_CHILD = """
import sys
sys.path.insert(0, {src!r})
import shardstream as wds


def rss():  # the current RSS in KiB (ru_maxrss would be the parent's where it was higher: kept across exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


ds = wds.WebDataset({paths!r}, shardshuffle=False, zero_copy={zero_copy})
before = rss()
kept = [s["bin"] for s in ds]
print((rss() - before) / 1024, sum(len(k) for k in kept) / 2**20)
"""


def rss_rows(quick: bool) -> str:
    """The RSS added by holding every field of the large group at once (``/proc``: Linux), copies against views."""
    from _common import ROOT

    paths = big_shards(32 if quick else 128)
    lines = ["## large: RSS added by holding every field at once (MiB; a fresh interpreter each)"]
    for zero_copy in (False, True):
        code = RSS_CHILD.format(src=str(ROOT / "src"), paths=paths, zero_copy=zero_copy)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        lines.append(f"zero_copy={zero_copy!s:5}  held {float(out[1]):,.0f} MiB of fields: +{float(out[0]):,.0f} MiB")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the data (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every contender in turn")
    parser.add_argument("--passes", type=int, default=2, help="timed passes per cell (best kept)")
    parser.add_argument("--only", nargs="*", choices=list(GROUPS), help="some groups only")
    parser.add_argument("--rss", action="store_true", help="also the RSS of holding the large fields (Linux)")
    args = parser.parse_args()
    from shardstream.tar import accelerated

    print(f"C accelerator: {accelerated()}; load average {os.getloadavg()[0]:.1f} at the start")
    for group in args.only or list(GROUPS):
        contenders = GROUPS[group](args.quick)
        unit = "MB/s" if group == "large" else "samples/s"
        rates = measure(contenders, args.rounds, args.passes)
        if group == "large":
            rates = {n: [(w / 1e6, c / 1e6) for w, c in v] for n, v in rates.items()}
        print(report(group, rates, unit), flush=True)
        print(flush=True)
    if args.rss:
        print(rss_rows(args.quick))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
