"""Training batches made on a Dask cluster (``shardstream.cluster.ClusterLoader``) next to local DataLoader workers.

JPEG -> 224 x 224 centred crop (the bench-peers image work, ``peers_data.pil_work``), batches of ``--batch``,
collated into one uint8 array. The trainer only consumes (it touches each batch's first byte). Side by side, on
the same cores, interleaved ``--rounds`` times:

- *local*: ``TrainingLoader(dataset, num_workers=2)`` (2 DataLoader worker processes);
- *cluster*: ``ClusterLoader(dataset, client)`` on 2 Dask worker processes (a ``LocalCluster``, one thread each).

Reported: samples/s and the ratio cluster/local (the goal: >= 0.9x), the trainer's CPU seconds per batch, the time
to the first batch, and the transport rate (the batches' bytes over the wall time) with the trainer's CPU per MB
received. Also the per-worker rate (samples/s of one task stream) from which docs/cluster.md estimates K machines,
and the trainer's memory against ``in_flight``: a trainer slower than the cluster (it waits 0.1 s per batch) over
batches that cost the workers nothing (zeros of the crop's shape), for a few budgets, each in a fresh trainer
process connected to the same cluster: the peak of the memory Python allocated while it consumed (``tracemalloc``:
the received frames and the arrays over them), and the process's peak resident set size over its RSS before the
pass (``VmHWM`` of ``/proc/self/status`` on Linux, else ``ru_maxrss``), checked against the budget: the RSS before
plus ``in_flight + 2`` batches (the batches held, the one the trainer uses, the one arriving).

    .venv/bin/python benchmarks/bench_cluster.py [--samples 512] [--batch 32] [--rounds 2] [--in-flight 8]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

try:
    import dask
    from distributed import Client, LocalCluster
except ImportError:  # the benchmark venv may lack Dask: run_all.py goes on
    dask = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))

from peers_data import jpeg_shards, pil_work  # noqa: E402

from shardstream.cluster import ClusterLoader  # noqa: E402
from shardstream.training import TrainingDataset, TrainingLoader  # noqa: E402


def crop(sample: dict) -> tuple:
    return pil_work(sample["jpg"]), int(sample["cls"])


def stack(samples: list) -> tuple:
    return np.stack([s[0] for s in samples]), np.asarray([s[1] for s in samples])


def dataset(shards: list[str], batch: int) -> TrainingDataset:
    return TrainingDataset(shards, batch_size=batch, seed=0, map=crop, collate=stack, drop_last=True)


def zeros(sample: dict) -> tuple:
    return np.zeros((224, 224, 3), np.uint8), int(sample["cls"])


def _status_mb(field: str) -> float | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MB, or None where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return None


def _max_rss_mb() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6


def held_memory(address: str, shards: list[str], batch: int, in_flight: int, batches: int = 24) -> dict:
    """In this process (a fresh one), while a slow trainer consumes ``batches`` batches: the peak MB Python
    allocated (``traced``), the RSS before the pass (``base``) and the peak RSS of the process (``peak``)."""
    ds = TrainingDataset(shards, batch_size=batch, seed=0, map=zeros, collate=stack, drop_last=True)
    with Client(address) as client, ClusterLoader(ds, client, in_flight=in_flight, batches_per_task=1) as loader:
        gc.collect()
        base = _status_mb("VmRSS") or _max_rss_mb()
        tracemalloc.start()
        try:
            for n, (images, _labels) in enumerate(loader):
                int(images[0, 0, 0, 0])
                del images, _labels
                time.sleep(0.1)  # a trainer busier than the cluster: the budget fills
                if n + 1 == batches:
                    break
            traced = tracemalloc.get_traced_memory()[1] / 1e6
        finally:
            tracemalloc.stop()
        return {"traced": traced, "base": base, "peak": _status_mb("VmHWM") or _max_rss_mb()}


def held_memory_apart(address: str, shards: list[str], batch: int, in_flight: int) -> dict:
    """:func:`held_memory` in a fresh trainer process (its RSS is this budget's alone)."""
    child = subprocess.run([sys.executable, __file__, "--memory-of", address, "--in-flight", str(in_flight),
                            "--batch", str(batch), *shards], check=True, capture_output=True, text=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def consume(loader) -> dict:
    """Iterate ``loader`` once: wall seconds, trainer CPU seconds, first-batch seconds, batches, bytes."""
    start, cpu = time.perf_counter(), time.process_time()
    first, batches, size = None, 0, 0
    for images, _labels in loader:
        if first is None:
            first = time.perf_counter() - start
        batches += 1
        size += images.numel() * images.element_size() if hasattr(images, "numel") else images.nbytes
        int(images[0, 0, 0, 0])  # the trainer touches the batch
    return {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu, "first": first,
            "batches": batches, "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)  # a child: held_memory on this scheduler
    parser.add_argument("shards", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if dask is None:
        print("skipped: Dask is not installed here (pip install 'shardstream[dask]')")
        return
    if args.memory_of:
        print(json.dumps(held_memory(args.memory_of, args.shards, args.batch, args.in_flight)))
        return

    shards = jpeg_shards(args.samples, per_shard=max(1, args.samples // 4))
    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(cluster)
    results: dict[str, list[dict]] = {"local": [], "cluster": []}
    try:
        # warm both (imports in the workers, the shards' sidecars, the page cache): untimed
        consume(TrainingLoader(dataset(shards, args.batch), num_workers=2, persistent_workers=False))
        with ClusterLoader(dataset(shards, args.batch), client, in_flight=args.in_flight, batches_per_task=1) as c:
            consume(c)
        for _ in range(args.rounds):
            results["local"].append(consume(TrainingLoader(dataset(shards, args.batch), num_workers=2)))
            with ClusterLoader(dataset(shards, args.batch), client, in_flight=args.in_flight,
                               batches_per_task=1) as c:
                results["cluster"].append(consume(c))
        # one worker's rate: one task stream on one Dask worker (what K machines multiply)
        one = client.scheduler_info()["workers"]
        with ClusterLoader(dataset(shards, args.batch), client, workers=sorted(one)[:1], in_flight=args.in_flight,
                           batches_per_task=1) as c:
            single = consume(c)
        memory = {budget: held_memory_apart(cluster.scheduler_address, shards, args.batch, budget)
                  for budget in (2, 8, 16)}
    finally:
        client.close()
        cluster.close()

    def total(name: str, key: str) -> float:
        return sum(r[key] for r in results[name])

    print(f"load: {os.getloadavg()[0]:.1f} (1-min), {os.cpu_count()} CPUs; {args.samples} JPEGs, batch {args.batch}, "
          f"{args.rounds} interleaved rounds")
    print(f"{'':10} {'samples/s':>10} {'ratio':>7} {'trainer CPU ms/batch':>21} {'first batch s':>14} "
          f"{'MB/s':>8} {'trainer CPU s/GB':>17}")
    rate = {}
    for name in ("local", "cluster"):
        wall, cpu, batches, size = (total(name, k) for k in ("wall", "cpu", "batches", "bytes"))
        rate[name] = batches * args.batch / wall
        first = np.median([r["first"] for r in results[name]])
        print(f"{name:10} {rate[name]:>10.1f} {rate[name] / rate['local']:>6.2f}x {1000 * cpu / batches:>21.2f} "
              f"{first:>14.2f} {size / wall / 1e6:>8.1f} {cpu / (size / 1e9):>17.2f}")
    print(f"one Dask worker: {single['batches'] * args.batch / single['wall']:.1f} samples/s "
          f"({single['bytes'] / single['wall'] / 1e6:.1f} MB/s)")
    size = args.batch * 224 * 224 * 3 / 1e6
    print(f"trainer memory (a fresh process per budget), batches of {size:.1f} MB; bound: RSS before the pass + "
          "(in_flight + 2) batches")
    for budget, m in memory.items():
        grew, bound = m["peak"] - m["base"], (budget + 2) * size
        print(f"in_flight={budget:>2}: peak allocated {m['traced']:6.1f} MB = {m['traced'] / size:4.1f} batches; "
              f"peak RSS {m['peak']:7.1f} MB = before {m['base']:6.1f} + {grew:6.1f} MB = {grew / size:4.1f} batches "
              f"{'<=' if grew <= bound else '>'} bound {bound:6.1f} MB")


if __name__ == "__main__":
    main()

