"""Issue 17's workloads side by side: shardstream next to webdataset 1.0.2, litdata, DALI (CPU), FFCV 1.0.2 and
MosaicML Streaming, ratios to the best peer of each row.

    make bench-peers                                    # venvs (benchmarks/peers/setup.sh), then this script
    .venv-bench/bin/python benchmarks/peers/bench_peers.py [--quick] [--only WORKLOAD ...] [--contenders NAME ...]

Every contender runs in its own interpreter (its own venv: webdataset, shardstream and the limits in .venv-bench,
each peer in .venv-peers-NAME), one workload at a time, on the same generated data (``bench-data/``; peers that
need their own format read a conversion of the same samples, made once and untimed: see peers_data.py). A peer
whose venv is missing, or that fails, shows ``n/a`` and the reason is printed under the table.

What is timed, for every contender alike (peers_run.py): the library's loader is built, then one untimed warm-up
pass over all the data (it starts persistent DataLoader workers, compiles FFCV's numba code, fills DALI's
pipeline and the page cache), then ``--repeat`` timed passes over all the data, and more while they took under
``--min-seconds`` in all, up to ``MAX_PASSES`` (the short rows' passes take a tenth of a second); a cell is the best
pass. One-time setup is therefore excluded for everyone; each pass's count is checked against the data's size.

Rows (``WORKLOADS``): a peer cell is ``rate (rate / best peer)``; rows marked "fast path" run shardstream's variant
only and are compared with the best peer (and floor) of the row they refine. ``limit``: the same work without a
loader (the plain PIL loop over JPEG bytes in memory, alone or split over 2 DataLoader workers; every shard read
with ``readinto`` into one buffer). ``floor`` (the small-sample rows): the least any tar reader does, each shard
mapped and every header touched (checksum, size) with the payload skipped, in C, no object built
(floor_walk.c); shardstream's rate is shown as a fraction of it too.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from peers_data import data  # noqa: E402

LIMIT, FLOOR, WDS, SS = "limit", "floor", "webdataset 1.0.2", "shardstream"
PEERS = [WDS, "litdata", "DALI (CPU)", "FFCV", "Streaming"]
VENVS = {LIMIT: ".venv-bench", FLOOR: ".venv-bench", WDS: ".venv-bench", SS: ".venv-bench",
         "litdata": ".venv-peers-litdata",
         "DALI (CPU)": ".venv-peers-dali", "FFCV": ".venv-peers-ffcv", "Streaming": ".venv-peers-streaming"}
MAIN = [WDS, "litdata", "DALI (CPU)", "FFCV", SS]
# id -> (row label, contenders, the row whose peers it is compared with)
WORKLOADS = {
    "raw": ("raw small samples, 200k x ~250 B .txt+.cls, per-sample dicts", [FLOOR, *MAIN], None),
    "decode": ('txt+cls decode, batches of 256: `.decode().to_tuple("txt", "cls").batched(256)`', [FLOOR, *MAIN],
               None),
    "decode-map": ('the same: `.to_tuple("txt", "cls").map_tuple(bytes.decode, int).batched(256)`', [WDS, SS],
                   "decode"),
    "decode-columns": ("fast path: `tarfile_to_columns(256)` + `decode_columns`", [SS], "decode"),
    "decode-columns-reader": ("fast path: `tarfile_to_columns(256, decode=Decoder())` (the same batches)", [SS],
                              "decode"),
    "decode-indexed": ("fast path: sidecar-indexed shards, `IndexedDataset.columns(256)`", [SS], "decode"),
    "jpeg1": ("JPEG -> 224x224 RGB, batches of 64, one process", [LIMIT, *MAIN], None),
    "jpeg1-threads": ("fast path: the same exact work on 2 threads, `.parallel_map(workers=2)`", [SS], "jpeg1"),
    "jpeg1-scaled": ("fast path: opt-in `decode_resized(scaled=True)`, one process", [SS], "jpeg1"),
    "jpeg2": ("JPEG -> 224, 2 DataLoader workers (DALI, FFCV: 2 threads)", [LIMIT, *MAIN], None),
    "jpeg2-scaled": ("fast path: `decode_resized(scaled=True)`, 2 DataLoader workers", [SS], "jpeg2"),
    "big": ("4 MiB samples, copies (GB/s)", [LIMIT, *MAIN], None),
    "big-views": ("4 MiB samples, views (GB/s): shardstream `zero_copy=True`, litdata's memoryviews", ["litdata", SS],
                  None),
    "shuffle": ("default training shuffle, batches of 100 (rate, diversity/abs Spearman)",
                [FLOOR, *MAIN[:4], "Streaming", SS], None),
}
MAX_PASSES = 15  # timed passes per cell at most (--min-seconds)
EXTRA = {"write": "writing all four datasets in the library's format (issue 7; s, lower is better)"}


def expected(workload: str, quick: bool) -> int:
    """What one pass must count: samples, or bytes for the 4 MiB rows."""
    kind = workload.split("-")[0]
    if kind == "big":
        return (32 if quick else 128) << 22
    if kind.startswith("jpeg"):
        return 256 if quick else 2000
    return 20_000 if quick else 200_000


def version(contender: str) -> str:
    from importlib.metadata import PackageNotFoundError, version as v

    dist = {WDS: "webdataset", "litdata": "litdata", "DALI (CPU)": "nvidia-dali-cuda130", "FFCV": "ffcv",
            "Streaming": "mosaicml-streaming"}.get(contender)
    try:
        return v(dist) if dist else ("floor_walk.c" if contender == FLOOR else "src/")
    except PackageNotFoundError:
        return "?"


def worker(contender: str, workload: str, quick: bool, repeat: int, min_seconds: float = 0.0) -> dict:
    """In the contender's venv: build, one untimed warm-up pass, then timed passes (best one kept): ``repeat`` of
    them, and more while the timed passes so far took under ``min_seconds`` (at most ``MAX_PASSES``), so that a
    row whose pass takes a tenth of a second gets as many chances at a quiet moment as the others."""
    from _common import warm
    from peers_run import RUNNERS

    if contender == SS:
        from shardstream import _native

        if _native.extension is None:  # a silent pure-Python fallback would make every shardstream row meaningless
            raise RuntimeError("shardstream's C walk is not built in src/: run setup.py build_ext --inplace")
    paths = data(workload, quick)
    warm(paths)
    run, rec = RUNNERS[contender](workload, paths)
    want = expected(workload, quick)
    result: dict = {"version": version(contender)}
    count = run()
    if rec is not None:  # the order of the warm-up pass: quality of the shuffle
        import numpy as np

        from shardstream.training import batch_diversity, rank_correlation

        labels = np.asarray(rec.labels)
        result["diversity"] = batch_diversity(labels, num_classes=1000)
        result["spearman"] = rank_correlation(labels)
    best = cpu_best = spent = 0.0
    passes = 0
    while passes < repeat or (spent < min_seconds and passes < MAX_PASSES):
        wall, cpu = time.perf_counter(), time.process_time()
        count = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        best, cpu_best = max(best, count / wall), max(cpu_best, count / max(cpu, 1e-9))
        spent, passes = spent + wall, passes + 1
    if count != want:
        result["warning"] = f"counted {count:,} of {want:,}"
    scale = 1e9 if workload.startswith("big") else 1.0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux: the process's peak, in MiB
    return dict(result, rate=best / scale, cpu_rate=cpu_best / scale, rss=rss, passes=passes)


def run_one(contender: str, workload: str, args) -> tuple[dict | None, str | None]:
    python = ROOT / VENVS[contender] / "bin" / "python"
    if not python.exists():
        return None, f"{contender}: {VENVS[contender]} is missing (benchmarks/peers/setup.sh)"
    cmd = [str(python), __file__, "--worker", contender, workload, "--repeat", str(args.repeat),
           "--min-seconds", str(args.min_seconds)]
    cmd += ["--quick"] if args.quick else []
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(ROOT / "src"))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return None, f"{contender}, {workload}: over {args.timeout:.0f} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"{contender}, {workload}: failed: {last[:300]}"
    return json.loads(done.stdout.strip().splitlines()[-1]), None


def fmt(rate: float, workload: str, key: str = "rate") -> str:
    return f"{rate:,.2f}" if workload.startswith("big") and key != "rss" else f"{rate:,.0f}"


def table(results: dict[str, dict[str, dict]], key: str = "rate") -> str:
    """Markdown: one row per workload, a column per contender, and shardstream against the best peer and limit
    (for ``key="rss"``, the best is the smallest)."""
    pick = min if key == "rss" else max
    cols = [LIMIT, FLOOR, *PEERS, SS]
    head = ["workload", *cols, "best peer", "shardstream / best peer", "shardstream / limit", "shardstream / floor"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for w, cells in results.items():
        ref = results.get(WORKLOADS[w][2] or w, {}) if w in WORKLOADS else {}
        peers = {n: c[key] for source in (cells, ref) for n, c in source.items() if n in PEERS and c}
        best = pick(peers.items(), key=lambda kv: kv[1]) if peers else None
        limit = (cells.get(LIMIT) or ref.get(LIMIT) or {}).get(key)
        floor = (cells.get(FLOOR) or ref.get(FLOOR) or {}).get(key)
        row = [WORKLOADS[w][0] if w in WORKLOADS else EXTRA[w]]
        for name in cols:
            c = cells.get(name, "-")
            if c == "-" or c is None:
                row.append("-" if c == "-" else "n/a")
                continue
            text = fmt(c[key], w, key)
            if name in PEERS and best:
                text += f" ({c[key] / best[1]:.2f}x)"
            if "diversity" in c:
                text += f" {c['diversity']:.2f}/{c['spearman']:.3f}"
            row.append(text + (" ⚠" if "warning" in c else ""))
        ss = (cells.get(SS) or {}).get(key)
        row.append(f"{best[0]} {fmt(best[1], w, key)}" if best else "-")
        row.append(f"{ss / best[1]:.2f}x" if ss and best else "-")
        row.append(f"{ss / limit:.2f}x" if ss and limit else "-")
        row.append(f"{ss / floor:.2f}x" if ss and floor and key != "rss" else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the data (a smoke run)")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes per cell, after the warm-up (best kept)")
    parser.add_argument("--min-seconds", type=float, default=2.0,
                        help=f"more timed passes while those so far took less (fast rows; at most {MAX_PASSES})")
    parser.add_argument("--only", nargs="*", choices=[*WORKLOADS, *EXTRA], help="some workloads only")
    parser.add_argument("--contenders", nargs="*", choices=[*VENVS], metavar="NAME",
                        help=f"some contenders only (of: {', '.join(VENVS)})")
    parser.add_argument("--worker", nargs=2, metavar=("CONTENDER", "WORKLOAD"), help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per contender and workload")
    args = parser.parse_args()
    if args.worker:
        if args.worker[1] == "write":
            from peers_write import run_write

            print(json.dumps(run_write(args.worker[0], args.quick)))
        else:
            print(json.dumps(worker(*args.worker, args.quick, args.repeat, args.min_seconds)))
        return 0
    start = time.perf_counter()
    workloads = args.only or list(WORKLOADS)
    for w in workloads:
        if w != "write":
            data(w, args.quick)  # generated once, before any contender runs
    results: dict[str, dict[str, dict]] = {}
    notes: list[str] = []
    versions: dict[str, str] = {}
    for w in workloads:
        contenders = WORKLOADS[w][1] if w in WORKLOADS else [WDS, SS, "litdata", "FFCV"]
        contenders = [c for c in contenders if not args.contenders or c in args.contenders]
        results[w] = {}
        for name in contenders:
            t0 = time.perf_counter()
            cell, note = run_one(name, w, args)
            results[w][name] = cell
            if note and note not in notes:
                notes.append(note)
            if cell:
                versions[name] = cell.pop("version", versions.get(name, "?"))
                if "warning" in cell:
                    notes.append(f"{name}, {w}: {cell['warning']}")
            shown = f"{cell['rate']:,.2f}" if cell else "n/a"
            print(f"  {w:15} {name:17} {shown:>14}  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    quick = " (--quick: a tenth of the data)" if args.quick else ""
    print(f"## the workloads side by side, samples/s (GB/s where marked), best of {args.repeat} passes after a warm-up"
          f" (more, up to {MAX_PASSES}, while they took under {args.min_seconds:g} s){quick}")
    print(table({w: r for w, r in results.items() if w != "write"}))
    print("shuffle cells: rate, diversity/|Spearman| (1000 classes written in order; i.i.d. order gives 1.00/~0.025)")
    print("versions: " + ", ".join(f"{n} {v}" for n, v in versions.items()))
    print("\n## the same per CPU-second of the contender's process (all its threads; a loaded machine moves these much"
          " less than the rates above), DataLoader rows excepted (their workers' CPU is not counted)")
    print(table({w: {n: c for n, c in r.items() if not (w.startswith("jpeg2") and n in (LIMIT, WDS, SS, "litdata"))}
                 for w, r in results.items() if w != "write"}, key="cpu_rate"))
    print("\n## peak RSS of the contender's process, MiB (lower is better; DataLoader rows: the main process only)")
    print(table({w: {n: c for n, c in r.items() if c is None or "rss" in c} for w, r in results.items() if w != "write"},
                key="rss"))
    for name, d in (results.get("write") or {}).items():
        if d:
            per = ", ".join(f"{k} {v:.2f} s" for k, v in d["per"].items())
            print(f"- write, {name}: {d['rate']:.2f} s ({per}); output {d['size']:.4f}x the minimal tar size")
    for note in notes:
        print(f"- {note}")
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
