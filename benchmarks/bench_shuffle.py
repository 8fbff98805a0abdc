"""Shuffling for training: quality next to webdataset's defaults, the price of a global shuffle, resume times.

1. Quality, on a dataset written sorted by class (1000 classes x 100 samples, 10 shards; generated once in
   ``bench-data/``, a ``.cls`` per sample): *diversity* = mean over batches of 100 of distinct classes / 95.21 (the i.i.d. expectation),
   and the mean |Spearman rho| between output position and original index in windows of 1000 (see
   :mod:`shardstream.training.quality`). webdataset 1.0.2's defaults run when it is importable (``.venv-bench``).
2. Throughput, samples/s, one process, page cache warm: plain sequential reading next to the default training
   configuration (a global permutation read by random access) and the bounded variants; small (~250 B) and
   8 KiB samples, fields as bytes (no decoding: the reading itself is compared), batches of ``--batch`` (100:
   the issue-17 row), as lists of samples (``collate=None``) and as the default collation (the default API).
   ``--cpu`` measures samples per CPU-second of this process (for A/B runs on a busy machine) instead of wall
   time; ``--throughput`` runs only this part.
3. Resume: the time from ``load_state_dict`` to the first batch, for a state saved at 10% and at 90% of an epoch
   (``TrainingLoader``, no workers), next to what replaying the epoch up to that point would cost.

    .venv-bench/bin/python benchmarks/bench_shuffle.py [--small 200000] [--medium 40000] [--batch 100] [--cpu]
        [--throughput]

4. ``--peers``: only the "shuffle" row of ``peers/bench_peers.py`` (the default ``TrainingDataset``, batches of 100,
   200k samples of ~250 B written sorted by class) side by side with FFCV in its venv, and with the shardstream of
   other trees (``--before SRC ...``, e.g. a worktree of main): each contender in its own interpreter
   (``shuffle_peer_worker.py``), interleaved ``--rounds`` times; per cell the median of the rounds of the best
   pass's rate, the peak RSS, the quality (diversity/|Spearman|) and where the resident memory is at the end.
   ``--venvs DIR`` is where ``.venv-bench`` and ``.venv-peers-ffcv`` are (default: the repository).

    .venv-bench/bin/python benchmarks/bench_shuffle.py --peers [--before ../main/src] [--rounds 3] [--venvs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable

import numpy as np
from _common import DATA, ROOT, big_shards, have, small_shards, table, timed, warm

from shardstream.training import TrainingDataset, TrainingLoader, batch_diversity, rank_correlation
from shardstream.writer import ShardWriter

CLASSES, PER_CLASS, SHARDS = 1000, 100, 10


def sorted_shards() -> list[str]:
    """1000 classes x 100 samples, sorted by class, in 10 shards: sample ``n`` has class ``n // 100``."""
    folder = DATA / "sorted-1000x100-cls"
    if not (folder / "DONE").exists():
        folder.mkdir(parents=True, exist_ok=True)
        with ShardWriter(str(folder / "sorted-%06d.tar"), maxcount=CLASSES * PER_CLASS // SHARDS) as sink:
            for n in range(CLASSES * PER_CLASS):
                sink.write({"__key__": f"{n:06d}", "cls": n // PER_CLASS})
        (folder / "DONE").write_text("ok")
    return sorted(str(p) for p in folder.glob("sorted-*.tar"))


def _samples(batches: Iterable) -> Iterable[dict]:
    for batch in batches:
        yield from batch


def quality(name: str, memory: str, samples: Iterable[dict]) -> tuple[str, float, float, str]:
    order = np.fromiter((int(s["__key__"]) for s in samples), dtype=np.int64)
    assert sorted(order.tolist()) == list(range(CLASSES * PER_CLASS)), name
    return name, batch_diversity(order // PER_CLASS, num_classes=CLASSES), rank_correlation(order), memory


def quality_rows(urls: list[str]) -> list[tuple[str, float, float, str]]:
    import shardstream as ss

    def training(**kw: object) -> Iterable[dict]:
        return _samples(TrainingDataset(urls, batch_size=100, collate=None, **kw))  # type: ignore[arg-type]

    rows = []
    if have("webdataset"):
        import webdataset

        rows.append(quality("webdataset 1.0.2: WebDataset(shardshuffle=True).shuffle(1000)", "1000 samples",
                            webdataset.WebDataset(urls, shardshuffle=True).shuffle(1000)))
    rows.append(quality("shardstream WebDataset, the same call", "1000 samples",
                        ss.WebDataset(urls, shardshuffle=True).shuffle(1000)))
    rows.append(quality("TrainingDataset default (shuffle='global')", "index + 1 batch", training()))
    for window in (1, 2, 4, 8):
        rows.append(quality(f"TrainingDataset shuffle='window', window={window}", f"index + {window} shards",
                            training(shuffle="window", window=window)))
    for window, buffer in ((8, 1000), (10, 10_000)):
        rows.append(quality(f"TrainingDataset shuffle='stream', window={window}, buffer={buffer}",
                            f"{window} streams + {buffer} samples", training(shuffle="stream", window=window,
                                                                             buffer=buffer)))
    rows.append(quality("TrainingDataset shuffle='none' (in order)", "-", training(shuffle="none")))
    return rows


def print_quality(rows: list[tuple[str, float, float, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    print("## shuffle quality: 1000 classes x 100 samples written sorted by class, 10 shards")
    print(f"{'':{width}}  {'diversity':>9}  {'|Spearman|':>10}  memory bound")
    for name, diversity, rho, memory in rows:
        print(f"{name:{width}}  {diversity:9.3f}  {rho:10.3f}  {memory}")


CPU = False  # --cpu: samples per CPU-second of this process instead of per second
BATCH = 100


def rate(make: Callable[[], Iterable], batched: bool) -> float:
    def run() -> int:
        return sum(len(b["__key__"] if isinstance(b, dict) else b) for b in make()) if batched \
            else sum(1 for _ in make())

    if CPU:
        best = float("inf")
        for _ in range(2):
            start = time.process_time()
            count = run()
            best = min(best, time.process_time() - start)
        return count / best
    seconds, count = timed(run, 2)
    return count / seconds


def throughput_rows(name: str, urls: list[str]) -> list[tuple[str, float, str]]:
    import shardstream as ss

    warm(urls)
    TrainingDataset(urls, batch_size=BATCH)  # builds the sidecars once (a header scan), outside the timings

    def training(collate: bool = False, **kw: object) -> Callable[[], Iterable]:
        more = {} if collate else {"collate": None}
        return lambda: TrainingDataset(urls, batch_size=BATCH, **more, **kw)  # type: ignore[arg-type]

    rows = [(f"{name}: sequential, WebDataset(urls)", rate(lambda: ss.WebDataset(urls), False), "s/s"),
            (f"{name}: sequential, shuffle='none'", rate(training(shuffle="none"), True), "s/s"),
            (f"{name}: default, shuffle='global' (lists)", rate(training(), True), "s/s"),
            (f"{name}: default, shuffle='global' (collated)", rate(training(collate=True), True), "s/s"),
            (f"{name}: shuffle='window', window=8", rate(training(shuffle="window"), True), "s/s"),
            (f"{name}: shuffle='stream' (8 streams, 1000)", rate(training(shuffle="stream"), True), "s/s")]
    if have("webdataset"):
        import webdataset

        rows.append((f"{name}: webdataset 1.0.2 shardshuffle+shuffle(1000)",
                     rate(lambda: webdataset.WebDataset(urls, shardshuffle=True).shuffle(1000), False), "s/s"))
    return rows


def resume_rows(urls: list[str]) -> list[tuple[str, float, float, float]]:
    rows = []
    for shuffle in ("global", "stream"):
        def loader() -> TrainingLoader:
            return TrainingLoader(TrainingDataset(urls, batch_size=256, shuffle=shuffle, collate=None),
                                  num_workers=0, collate_fn=lambda batch: batch)

        total = len(loader())
        times = []
        for fraction in (0.1, 0.9):
            first = loader()
            it = iter(first)
            start = time.perf_counter()
            for _ in range(int(fraction * total)):
                next(it)
            replay = time.perf_counter() - start
            state = first.state_dict()
            start = time.perf_counter()
            again = loader()
            again.load_state_dict(state)
            next(iter(again))
            times.append((time.perf_counter() - start, replay))
        rows.append((f"shuffle={shuffle!r}", times[0][0], times[1][0], times[1][1]))
    return rows


def peers(before: list[str], rounds: int, venvs: str) -> None:
    """The shuffle row, interleaved: ``rounds`` times each contender in turn (see the module docstring, 4.)."""
    worker = str(ROOT / "benchmarks" / "shuffle_peer_worker.py")
    here = str(ROOT / "src")
    contenders = [(f"shardstream {src}", ".venv-bench", "shardstream", src) for src in before]
    contenders += [(f"shardstream {here} (this tree)", ".venv-bench", "shardstream", here),
                   ("FFCV", ".venv-peers-ffcv", "FFCV", here)]
    results: dict[str, list[dict]] = {name: [] for name, *_ in contenders}
    load = []
    for r in range(rounds):
        load.append(os.getloadavg()[0])
        for name, venv, contender, src in contenders:
            cmd = [os.path.join(venvs, venv, "bin", "python"), worker, contender, src]
            env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=src)
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
            if done.returncode:
                print(f"{name}: failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {name}: {results[name][-1]}", file=sys.stderr)
    ffcv = statistics.median(c["rate"] for c in results["FFCV"]) if results["FFCV"] else None
    print(f"## the shuffle row: TrainingDataset (default) vs FFCV, median of {rounds} interleaved rounds "
          f"(load average at the rounds' starts: {', '.join(f'{x:.1f}' for x in load)})")
    print("| contender | samples/s | / FFCV | samples per CPU-s | peak RSS MiB | diversity / abs Spearman | "
          "resident at the end, MiB |")
    print("|---|---|---|---|---|---|---|")
    for name, cells in results.items():
        if not cells:
            print(f"| {name} | n/a | | | | | |")
            continue
        rate = statistics.median(c["rate"] for c in cells)
        where = ", ".join(f"{k} {v:.0f}" for k, v in sorted(cells[-1]["resident"].items(), key=lambda kv: -kv[1]))
        print(f"| {name} | {rate:,.0f} | {rate / ffcv if ffcv else float('nan'):.2f}x | "
              f"{statistics.median(c['cpu_rate'] for c in cells):,.0f} | "
              f"{statistics.median(c['peak_rss'] for c in cells):.0f} | "
              f"{cells[-1]['diversity']:.2f} / {cells[-1]['spearman']:.3f} | {where} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200_000, help="samples of the ~250 B dataset")
    parser.add_argument("--medium", type=int, default=40_000, help="samples of the 8 KiB dataset")
    parser.add_argument("--batch", type=int, default=100, help="samples per batch of the throughput rows")
    parser.add_argument("--cpu", action="store_true", help="samples per CPU-second instead of per second")
    parser.add_argument("--throughput", action="store_true", help="only the throughput rows")
    parser.add_argument("--peers", action="store_true", help="only the shuffle row next to FFCV (see 4.)")
    parser.add_argument("--before", nargs="*", default=[], help="--peers: src/ folders of other trees to compare")
    parser.add_argument("--rounds", type=int, default=3, help="--peers: interleaved rounds")
    parser.add_argument("--venvs", default=str(ROOT), help="--peers: the folder of .venv-bench, .venv-peers-ffcv")
    args = parser.parse_args()
    if args.peers:
        peers(args.before, args.rounds, args.venvs)
        return
    global CPU, BATCH
    CPU, BATCH = args.cpu, args.batch
    warnings.filterwarnings("ignore", message="set WebDataset")  # webdataset 1.0.2 on shardshuffle=True

    if not args.throughput:
        print_quality(quality_rows(sorted_shards()))
        print()
    small, medium = small_shards(args.small, 10_000), big_shards(args.medium, 8192, 10_000)
    unit = "samples per CPU-second" if CPU else "samples/s"
    rows = throughput_rows("250 B", small)
    print(table(f"throughput, {unit} (one process, page cache warm, fields as bytes, batches of {BATCH})", rows,
                rows[0][0]))
    rows = throughput_rows("8 KiB", medium)
    print(table(f"throughput, {unit} (8 KiB samples)", rows, rows[0][0]))
    if args.throughput:
        return
    print()
    print(f"## resume: load_state_dict -> first batch, seconds ({args.small} samples of 250 B, batches of 256)")
    print(f"{'':14}  {'at 10%':>8}  {'at 90%':>8}  {'replaying 90% instead':>22}")
    for name, early, late, replay in resume_rows(small):
        print(f"{name:14}  {early:8.4f}  {late:8.4f}  {replay:22.3f}")


if __name__ == "__main__":
    main()
