"""How cost grows with scale: five curves, each at 4-5 sizes over three or more orders of magnitude.

    python benchmarks/bench_scale.py [--quick] [--only plan,resume,indexed,cache] [--out FILE]

Prints one markdown table per curve and the growth the numbers show; ``--out`` also writes them to FILE (nothing
is written into the repository otherwise; generated shards go to the git-ignored ``bench-data/``, reused between
runs). Every measurement runs in a fresh process (``--child``), so memory figures are its own.

1. **plan**: one rank's epoch over 1k -> 1M shard URLs given as a brace pattern, a list, or a dataset spec, for
   1 -> 4,096 ranks of 8 DataLoader workers: ``TrainingDataset(shuffle="stream", lengths=...)`` made, the epoch
   plan and order computed, and the shards each of the last rank's 8 workers opens first (pure computation:
   nothing is read). Time, tracemalloc's peak and what stays allocated (bytes per shard), the RSS peak's growth;
   every rank's share is checked equal.
2. **resume**: a state saved 1k -> 100M samples into an epoch: its size (JSON bytes) and the time from
   ``load_state_dict`` to the first batch. The dataset is 200k shards x 1,000 samples listed by URL, the URLs
   cycling over 16 real shards (the plan and the order only see the shard list and its lengths; the reader
   opens only the shards the position lies in), read with ``shuffle="stream"`` (the resume that re-reads).
3. **indexed**: ``IndexedDataset`` over 100 -> 100k tiny shards with sidecar indexes, from a dataset index
   (``.json``) and from the list of shards: open descriptors (``/proc/self/fd``) after opening and after the
   first item, the RSS growth, the time to the first item.
4. **cache**: the shard cache (``cache_dir=``, ``cache_size=`` a tenth of the data) over 2 epochs of 10 -> 1k
   shards (counts, so 3 sizes: each is a multiple of the one before) served by Python's ``http.server``, in order and shuffled: hit rate, evictions, bytes downloaded,
   the time evicting takes per download, and the lock files left in the cache folder.
   (The time to the first batch with 100k shards behind an emulated link is ``bench_remote_link.py
   --many-shards``.)
"""

from __future__ import annotations

import argparse
import http.server
import json
import logging
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from typing import Any

from _common import DATA as _DATA, ROOT

DATA = pathlib.Path(os.environ.get("BENCH_SCALE_DATA") or _DATA)  # generated shards (the test gives a temporary one)

SAMPLES = 1000  # samples per shard in the plan and resume curves
RESUME_SHARDS = 200_000  # 200M samples
WORKERS = 8


# -- measuring in a child process ----------------------------------------------------------------------------

def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def child_plan(kind: str, shards: int, worlds: list[int]) -> list[dict]:
    """Plan the last rank's epoch for each number of ranks in turn, from scratch: timed without tracemalloc (it
    slows every allocation several times), then once more for the first number of ranks under tracemalloc (its
    peak, and what stays allocated while the dataset lives). The RSS growth is the first run's."""
    from shardstream.spec import load_spec
    from shardstream.training import TrainingDataset

    pattern = f"s3://bucket/train/shard-{{000000..{shards - 1:06d}}}.tar"
    given = [f"s3://bucket/train/shard-{i:06d}.tar" for i in range(shards)] if kind == "list" else None

    def plan_rank(world: int) -> tuple[Any, Any]:
        if kind == "spec":
            spec = load_spec({"sources": [{"name": "train", "shards": pattern}]})
            source = spec.sources[0].urls  # the source's URLs as the spec keeps them
        else:
            source = pattern if kind == "pattern" else given
        ds = TrainingDataset(source, batch_size=32, shuffle="stream", lengths=[SAMPLES] * shards, rank=world - 1,
                             world_size=world)
        plan, order, rank = ds.plan(world_size=world, num_workers=WORKERS), ds.order(0), world - 1
        for worker in range(min(WORKERS, plan.num_batches)):  # the shard each worker opens first
            at = int(plan.positions(rank, worker)[0])
            for group, _, labels in order.runs(at, at + 1):
                assert ds._urls[int(order.group_shards(group)[int(labels[0])])].startswith("s3://")
        return ds, plan

    plan_rank(1)  # imports and first-call caches, before the clock
    rows: list[dict] = []
    for world in worlds:
        rss = _status("VmRSS")
        start = time.perf_counter()
        ds, plan = plan_rank(world)
        seconds = time.perf_counter() - start
        # equal shares: every rank serves per_rank positions in num_batches batches, padding < one per rank
        served = (plan.num_batches - 1) * plan.batch_size + plan.batch_len(plan.num_batches - 1)
        equal = served == plan.per_rank and plan.per_rank * world == plan.length and 0 <= plan.length - plan.work < world
        rows.append({"world": world, "seconds": seconds, "equal": equal, "peak": None, "kept": None,
                     "rss": _status("VmHWM") - rss if not rows else None})
        del ds, plan
    tracemalloc.start()
    kept = plan_rank(worlds[0])
    rows[0]["kept"], rows[0]["peak"] = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return rows


def resume_urls(shards: int) -> tuple[list[str], list[str]]:
    """``shards`` URLs cycling over 16 real shards of SAMPLES tiny samples (written once), and those 16."""
    from shardstream.writer import ShardWriter

    folder = DATA / "scale-resume"
    if not (folder / "DONE").exists():
        folder.mkdir(parents=True, exist_ok=True)
        with ShardWriter(str(folder / "r-%02d.tar"), maxcount=SAMPLES) as sink:
            for i in range(16 * SAMPLES):
                sink.write({"__key__": f"s{i:06d}", "cls": str(i)})
        (folder / "DONE").write_text("ok")
    real = sorted(str(p) for p in folder.glob("r-*.tar"))
    return [real[i % 16] for i in range(shards)], real


def child_resume(positions: list[int], shards: int) -> list[dict]:
    from shardstream.training import TrainingDataset

    urls, _ = resume_urls(shards)

    def make() -> TrainingDataset:
        return TrainingDataset(urls, batch_size=32, shuffle="stream", lengths=[SAMPLES] * shards, rank=0,
                               world_size=1, seed=0)

    ds, rows = make(), []
    plan = ds.plan(world_size=1)
    next(iter(make()))  # imports and caches, before the clocks
    for position in positions:
        state = ds.state_for(0, plan, position // 32)
        size = len(json.dumps(state))
        fresh = make()
        start = time.perf_counter()
        fresh.load_state_dict(state)
        batch = next(iter(fresh))
        rows.append({"position": position, "bytes": size, "seconds": time.perf_counter() - start,
                     "batch": len(batch["__key__"])})
    return rows


def indexed_shards(count: int) -> tuple[list[str], str]:
    """``count`` tiny indexed shards (4 samples each; written when missing, as copies of the first shard and its
    sidecar: a sidecar is checked by size and content fingerprint, which copies share), and a dataset index of them."""
    from shardstream.indexed import DatasetIndex, ShardEntry, index_shard, sidecar_path
    from shardstream.writer import TarWriter

    folder = DATA / "scale-indexed"
    folder.mkdir(parents=True, exist_ok=True)
    first = str(folder / "t-000000.tar")
    if not os.path.exists(sidecar_path(first)):
        with TarWriter(first) as sink:
            for i in range(4):
                sink.write({"__key__": f"k{i}", "txt": f"sample {i}", "cls": str(i)})
        index_shard(first)
    if not os.path.exists(sidecar_path(str(folder / f"t-{count - 1:06d}.tar"))):
        data, side = open(first, "rb").read(), open(sidecar_path(first), "rb").read()
        for i in range(1, count):
            name = str(folder / f"t-{i:06d}.tar")
            if not os.path.exists(sidecar_path(name)):
                with open(name, "wb") as f:
                    f.write(data)
                with open(sidecar_path(name), "wb") as f:  # after its shard: a sidecar says the shard is whole
                    f.write(side)
    shards = [str(folder / f"t-{i:06d}.tar") for i in range(count)]
    path = folder / f"index-{count}.json"
    if not path.exists():
        from shardstream.indexed import ShardIndex

        one = ShardIndex.load(shards[0])
        entries = tuple(ShardEntry(s, sidecar_path(s), len(one), one.size, one.fingerprint) for s in shards)
        DatasetIndex(entries).save(str(path))
    return shards, str(path)


def child_indexed(count: int, how: str) -> dict:
    from shardstream.indexed import IndexedDataset

    shards, index = indexed_shards(count)
    IndexedDataset(indexed_shards(1)[0])[0]  # imports, before the clock
    fds, rss = _fds(), _status("VmRSS")
    start = time.perf_counter()
    ds = IndexedDataset(index if how == "index" else shards)
    opened = time.perf_counter() - start
    fds_open = _fds() - fds
    item = ds[len(ds) - 1]
    first = time.perf_counter() - start
    assert item["__key__"] == "k3", item
    return {"open_s": opened, "first_s": first, "fds_open": fds_open, "fds_first": _fds() - fds,
            "rss": _status("VmHWM") - rss, "samples": len(ds)}


def child_cache(count: int, shuffled: bool, work: str) -> dict:
    import shardstream as ss

    shards, _ = indexed_shards(count)
    size = os.path.getsize(shards[0])
    served = {"requests": 0, "bytes": 0}

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=os.path.dirname(shards[0]), **k)

        def log_message(self, *a):
            served["requests"] += 1
            served["bytes"] += size

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    said = {"cached": 0, "evicted": 0}

    class Count(logging.Handler):
        def emit(self, record):
            word = record.getMessage().split(" ", 1)[0]
            if word in said:
                said[word] += 1

    log = logging.getLogger("shardstream.io.cache")
    log.addHandler(Count()), log.setLevel(logging.INFO)
    urls = [f"http://127.0.0.1:{server.server_address[1]}/{os.path.basename(s)}" for s in shards]
    epochs = []
    cache_dir = os.path.join(work, "cache")
    ds = ss.WebDataset(urls, cache_dir=cache_dir, cache_size=count * size // 10,
                       shardshuffle=count if shuffled else False, seed=1, empty_check=False)
    from shardstream.io.cache import ShardCache  # noqa: PLC0415 - with the package under test

    evicting = {"s": 0.0}
    real_evict = ShardCache.evict

    def timed_evict(self, needed=0):  # the eviction's share of each download (making room, before and after)
        began = time.perf_counter()
        try:
            return real_evict(self, needed)
        finally:
            evicting["s"] += time.perf_counter() - began

    ShardCache.evict = timed_evict
    try:
        for _ in range(2):  # each iteration is the next epoch (a new shard order when shuffled)
            before, began = (dict(served), dict(said), evicting["s"]), time.perf_counter()
            samples = sum(1 for _ in ds)
            seconds = time.perf_counter() - began
            downloads = said["cached"] - before[1]["cached"]
            epochs.append({"samples": samples, "downloads": downloads, "hit_rate": 1 - downloads / count,
                           "evictions": said["evicted"] - before[1]["evicted"],
                           "bytes": served["bytes"] - before[0]["bytes"], "seconds": seconds,
                           "evict_ms": (evicting["s"] - before[2]) * 1e3 / max(downloads, 1),
                           "locks": len(os.listdir(os.path.join(cache_dir, ".locks")))})
    finally:
        ShardCache.evict = real_evict
        server.shutdown()
    return {"size": size, "epochs": epochs}


INLINE = False  # --smoke: every measurement in this process (quicker; its memory figures are then not its own)


def run_child(*args: object) -> object:
    if INLINE:
        kind, *rest = json.loads(json.dumps(args))
        return CHILDREN[kind](*rest)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(list(args))], env=env, capture_output=True,
                         text=True, timeout=1800, check=False)
    if out.returncode:
        raise RuntimeError(f"bench_scale child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


CHILDREN = {"plan": child_plan, "resume": child_resume, "indexed": child_indexed, "cache": child_cache}


# -- the curves ----------------------------------------------------------------------------------------------

def growth(xs: list[float], ys: list[float]) -> str:
    """The growth the points show: the exponent of y ~ x^k between the two largest sizes, named."""
    (x0, y0), (x1, y1) = (xs[-2], ys[-2]), (xs[-1], ys[-1])
    if y0 <= 0 or y1 <= 0:
        return "-"
    k = math.log(y1 / y0) / math.log(x1 / x0)
    name = "constant" if k < 0.25 else "sub-linear (log-like)" if k < 0.75 else "linear" if k < 1.3 else "super-linear"
    return f"{name} (x{y1 / y0:.2f} for x{x1 / x0:.0f}: exponent {k:.2f})"


def curve_plan(sizes: list[int], worlds: list[int], kinds: list[str]) -> list[str]:
    lines = ["## 1. planning one rank's epoch (TrainingDataset, shuffle='stream', 8 workers per rank)", "",
             "| shards | given as | ranks | time s | tracemalloc peak MB | kept B/shard | RSS growth MB | equal |",
             "|---|---|---|---|---|---|---|---|"]
    times: dict[tuple[str, int], list[float]] = {}
    for shards in sizes:
        for kind in kinds:
            for r in run_child("plan", kind, shards, worlds):
                world = r["world"]
                times.setdefault((kind, world), []).append(r["seconds"])
                rss = "-" if r["rss"] is None else f"{r['rss'] / 1e6:.1f}"
                peak = "-" if r["peak"] is None else f"{r['peak'] / 1e6:.1f}"
                kept = "-" if r["kept"] is None else f"{r['kept'] / shards:.0f}"
                lines.append(f"| {shards:,} | {kind} | {world:,} | {r['seconds']:.3f} | {peak} | {kept} | {rss} | "
                             f"{'yes' if r['equal'] else 'NO'} |")
                assert r["equal"], r
    if len(sizes) > 1:
        lines += [""] + [f"- time, {kind}, {world:,} ranks: {growth(sizes, t)}"
                         for (kind, world), t in times.items() if world == worlds[0]]
    return lines


def curve_resume(positions: list[int], shards: int) -> list[str]:
    rows = run_child("resume", positions, shards)
    lines = [f"## 2. resume ({shards:,} shards x {SAMPLES:,} samples, shuffle='stream', batch 32)", "",
             "| position | state bytes | load_state_dict -> first batch s |", "|---|---|---|"]
    lines += [f"| {r['position']:,} | {r['bytes']:,} | {r['seconds']:.3f} |" for r in rows]
    if len(rows) > 1:
        lines += ["", f"- state size: {growth(positions, [r['bytes'] for r in rows])}",
                  f"- time to the first batch: {growth(positions, [r['seconds'] for r in rows])}"]
    return lines


def curve_indexed(counts: list[int]) -> list[str]:
    lines = ["## 3. IndexedDataset over tiny indexed shards (4 samples each)", "",
             "| shards | from | open s | first item s | fds after open | fds after first item | RSS growth MB |",
             "|---|---|---|---|---|---|---|"]
    firsts: dict[str, list[float]] = {}
    for count in counts:
        for how in ("index", "list"):
            r = run_child("indexed", count, how)
            firsts.setdefault(how, []).append(r["first_s"])
            lines.append(f"| {count:,} | {'dataset index' if how == 'index' else 'shard list'} | {r['open_s']:.3f} | "
                         f"{r['first_s']:.3f} | {r['fds_open']} | {r['fds_first']} | {r['rss'] / 1e6:.1f} |")
    if len(counts) > 1:
        lines += [""] + [f"- time to the first item, {how}: {growth(counts, t)}" for how, t in firsts.items()]
    return lines


def curve_cache(counts: list[int]) -> list[str]:
    lines = ["## 4. the shard cache, cache = 1/10 of the data, 2 epochs", "",
             "| shards | order | epoch | downloads | hit rate | evictions | MB downloaded | eviction ms per download "
             "| lock files left | epoch s |", "|---|---|---|---|---|---|---|---|---|---|"]
    per_download: dict[int, float] = {}
    for count in counts:
        for shuffled in (False, True):
            with tempfile.TemporaryDirectory(prefix="bench-scale-") as work:
                r = run_child("cache", count, shuffled, work)
            for epoch, e in enumerate(r["epochs"]):
                assert e["samples"] == 4 * count, e
                per_download[count] = max(per_download.get(count, 0.0), e["evict_ms"])
                lines.append(f"| {count:,} | {'shuffled' if shuffled else 'in order'} | {epoch} | {e['downloads']:,} | "
                             f"{e['hit_rate']:.0%} | {e['evictions']:,} | {e['bytes'] / 1e6:.2f} | "
                             f"{e['evict_ms']:.2f} | {e['locks']:,} | {e['seconds']:.1f} |")
    if len(counts) > 1:
        lines += ["", f"- eviction per download (the worst epoch of each size): "
                      f"{growth(counts, [per_download[c] for c in counts])}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller sizes (a few minutes)")
    parser.add_argument("--smoke", action="store_true", help="the smallest size of each curve (seconds: the test)")
    parser.add_argument("--only", default="plan,resume,indexed,cache", help="curves to run, comma-separated")
    parser.add_argument("--out", help="also write the tables to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = json.loads(args.child)
        print(json.dumps(CHILDREN[kind](*rest)))
        return 0
    only = set(args.only.split(","))
    global INLINE
    INLINE = args.smoke
    if args.smoke:
        plan = ([1000], [4096, 1], ["pattern"])
        resume, indexed, cache = ([1000, 100_000], 1000), [100], [10]
    elif args.quick:
        plan = ([1000, 10_000, 100_000], [4096, 1, 64], ["pattern", "list"])
        resume, indexed, cache = ([1000, 100_000, 10_000_000], 20_000), [100, 1000, 10_000], [10, 100, 1000]
    else:
        plan = ([1000, 10_000, 100_000, 1_000_000], [4096, 1, 8, 64, 512], ["pattern", "list", "spec"])
        resume = ([1000, 100_000, 1_000_000, 10_000_000, 100_000_000], RESUME_SHARDS)
        indexed, cache = [100, 1000, 10_000, 100_000], [10, 100, 1000, 10_000]
    began, out = time.perf_counter(), []
    for name, run in (("plan", lambda: curve_plan(*plan)), ("resume", lambda: curve_resume(*resume)),
                      ("indexed", lambda: curve_indexed(indexed)), ("cache", lambda: curve_cache(cache))):
        if name in only:
            lines = run()
            print("\n".join(lines) + "\n", flush=True)
            out += [*lines, ""]
    out.append(f"took {time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.1f} "
               f"({os.cpu_count()} cores)")
    print(out[-1])
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
