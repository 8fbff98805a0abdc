"""One contender of ``bench_shuffle.py --peers``, in its own interpreter: the "shuffle" row of
``peers/bench_peers.py`` (the same loaders, from ``peers/peers_run.py``, on the same data), measured the same way
(build, one untimed warm-up pass, then timed passes; the best kept), plus where the process's resident memory is
at the end, by kind of mapping (``/proc/self/smaps``). Prints one JSON line.

    python benchmarks/shuffle_peer_worker.py CONTENDER SRC [--samples 200000] [--passes 3] [--min-seconds 2]

``CONTENDER`` is ``shardstream`` or ``FFCV`` (a name of ``peers_run.RUNNERS``); ``SRC`` is the ``src/`` folder of the
shardstream tree to measure (or to compute the quality figures with, for a peer).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))


def resident() -> dict[str, float]:
    """MiB of resident memory by kind: the data files mapped (``.tar``, ``.beton``...), anonymous memory (heap,
    arenas, copies), libraries, and the rest."""
    kinds: dict[str, float] = {}
    kind = "other"
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else ""
                kind = ("data files" if name.endswith((".tar", ".beton")) else
                        "libraries" if ".so" in name else
                        "anonymous" if name in ("", "[heap]") else "other")
            elif head and head[0] == "Rss:":
                kinds[kind] = kinds.get(kind, 0.0) + int(head[1]) / 1024
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contender")
    parser.add_argument("src")
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=2.0)
    args = parser.parse_args()
    from peers_data import sorted_shards  # puts this tree's src/ on the path (benchmarks/_common.py)

    sys.path.insert(0, str(pathlib.Path(args.src).resolve()))  # ... and the tree measured goes first
    import numpy as np
    from peers_run import RUNNERS

    from shardstream.training import batch_diversity, rank_correlation

    paths = sorted_shards(args.samples)
    run, rec = RUNNERS[args.contender]("shuffle", paths)
    count = run()  # the warm-up pass: its order gives the quality figures
    labels = np.asarray(rec.labels)
    out: dict = {"diversity": batch_diversity(labels, num_classes=1000), "spearman": rank_correlation(labels)}
    best = cpu_best = spent = 0.0
    passes = 0
    while passes < args.passes or (spent < args.min_seconds and passes < 15):
        wall, cpu = time.perf_counter(), time.process_time()
        count = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        best, cpu_best = max(best, count / wall), max(cpu_best, count / max(cpu, 1e-9))
        spent, passes = spent + wall, passes + 1
    assert count == args.samples, (count, args.samples)
    import shardstream

    out.update(rate=best, cpu_rate=cpu_best, passes=passes, src=str(pathlib.Path(shardstream.__file__).parent),
               peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, resident=resident())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
