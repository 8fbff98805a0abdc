"""Converting a dataset into a streaming format, side by side: shardstream.convert vs litdata, Streaming, webdataset.

    make bench-convert                                         # sets up the peers, then runs this
    PYTHONPATH=src python benchmarks/bench_convert.py [--jpeg-mb 200 | --large] [--small 200000] [--only ROW ...]

Two inputs, generated once into ``bench-data/convert/`` (git-ignored):

- ``jpeg``: an ImageFolder of JPEG files with 10 class folders (labels): real JPEGs encoded by Pillow, each made
  unique by a random COM segment, ~100 KB each; 200 MB by default, 1 GB with ``--large``;
- ``small``: 200k small samples, one JSON Lines file (a ~100 B caption and a label per line).

Every contender starts from those files and writes ~64 MB shards of the same samples (image bytes as they are,
label; caption, label) into ``bench-data/convert/out/`` (removed after each run); the time is the whole
conversion, process pools and clusters started inside it. Rows:

- shardstream: ``convert(src, dst, engine="local", workers=1 | 2)``; ``engine="dask", workers=2`` (a
  ``LocalCluster``, its start included); indexes (sidecar, DALI, dataset.json) are written too, except in the
  ``no index`` row (``index=False``: the peers write no per-sample index but their own format's). Like the
  peers, which never flush their files to disk, these rows run with ``SHARDSTREAM_FSYNC=0``: like with like.
  The library's default flushes each shard to disk before its rename (a power loss never leaves a short shard
  under its final name); the ``x2 fsync (default)`` row shows what that costs (on the small set, 2 KiB of tar
  per sample: ~400 MB reach the disk);
- litdata: ``optimize(fn, inputs, output_dir, num_workers=2, chunk_bytes="64MB")``;
- Streaming: a ``MDSWriter`` loop (one process, as its documentation shows);
- webdataset 1.0.2: a ``ShardWriter`` loop (one process).

Each peer runs in its own venv (``.venv-peers-NAME``); a missing venv shows ``n/a``. The table gives seconds
and the ratio *peer time / shardstream 2-worker time* (above 1: shardstream is faster), and the 1 -> 2 worker
scaling. Each cell is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "bench-data" / "convert"
OUT = DATA / "out"
CHUNK = 64 << 20
CONTENDERS = {  # row -> (venv or None for this interpreter, function name)
    "shardstream local x1": (None, "shardstream_local1"),
    "shardstream local x2": (None, "shardstream_local2"),
    "shardstream dask x2": (None, "shardstream_dask2"),
    "shardstream x2 no index": (None, "shardstream_noindex2"),
    "shardstream x2 fsync (default)": (None, "shardstream_local2"),
    "litdata optimize x2": (".venv-peers-litdata", "litdata2"),
    "Streaming MDSWriter": (".venv-peers-streaming", "mds"),
    "webdataset ShardWriter": (".venv-peers-webdataset", "webdataset"),
}


# -- data -------------------------------------------------------------------------------------------------------


def make_jpegs(megabytes: int) -> str:
    folder = DATA / f"jpeg-{megabytes}mb"
    if (folder / "DONE").exists():
        return str(folder)
    import numpy as np
    import PIL.Image

    rng = np.random.default_rng(0)
    bases = []
    for i in range(8):  # a few real photos-like JPEGs (noise + gradients), ~100 KB each
        x = np.linspace(0, 255, 320, dtype=np.float32)
        img = (rng.normal(0, 40, (320, 320, 3)) + x[None, :, None] * (i % 3) / 2 + x[:, None, None] / 3)
        out = io.BytesIO()
        PIL.Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(out, format="JPEG", quality=85)
        bases.append(out.getvalue())
    r = random.Random(0)
    total, n = 0, 0
    while total < megabytes << 20:
        base = bases[n % len(bases)]
        comment = r.randbytes(r.randrange(200, 4000))
        segment = b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment  # a COM segment: still a JPEG
        data = base[:2] + segment + base[2:]
        cls = folder / f"class{n % 10}"
        cls.mkdir(parents=True, exist_ok=True)
        (cls / f"{n:07d}.jpg").write_bytes(data)
        total += len(data)
        n += 1
    (folder / "DONE").write_text(str(n))
    return str(folder)


def make_small(count: int) -> str:
    path = DATA / f"small-{count}.jsonl"
    if path.exists():
        return str(path)
    DATA.mkdir(parents=True, exist_ok=True)
    r = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    with open(f"{path}.tmp", "w") as f:
        f.writelines(json.dumps({"__key__": f"{i:08d}", "caption": " ".join(r.choice(words) for _ in range(16)),
                                "label": r.randrange(1000)}) + "\n" for i in range(count))
    os.replace(f"{path}.tmp", path)
    return str(path)


def jpeg_listing(root: str) -> list[tuple[str, int]]:
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    return [(os.path.join(root, c, name), i) for i, c in enumerate(classes)
            for name in sorted(os.listdir(os.path.join(root, c)))]  # fmt: skip


def json_lines(path: str):
    with open(path, "rb") as f:
        for line in f:
            yield json.loads(line)


# -- contenders (each runs inside its own interpreter) -----------------------------------------------------------


def _shardstream(kind: str, src: str, out: str, engine: str, workers: int, index: bool = True) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from shardstream.convert import convert

    result = convert(src, out, engine=engine, workers=workers, maxsize=CHUNK, progress=False, index=index)
    SPLIT["workers"] = sorted(result.worker_cpu.values(), reverse=True)  # CPU seconds of the tasks, per worker
    return result.samples


SPLIT: dict = {}  # shardstream rows: where the CPU went (see child())


def shardstream_noindex2(kind: str, src: str, out: str) -> int:
    return _shardstream(kind, src, out, "local", 2, index=False)


def shardstream_local1(kind: str, src: str, out: str) -> int:
    return _shardstream(kind, src, out, "local", 1)


def shardstream_local2(kind: str, src: str, out: str) -> int:
    return _shardstream(kind, src, out, "local", 2)


def shardstream_dask2(kind: str, src: str, out: str) -> int:
    return _shardstream(kind, src, out, "dask", 2)


def _read_image(item):
    path, label = item
    with open(path, "rb") as f:
        return {"image": f.read(), "label": label}


def _small_rows(item):
    path, start, stop = item
    with open(path, "rb") as f:
        for n, line in enumerate(f):
            if n >= stop:
                return
            if n >= start:
                row = json.loads(line)
                yield {"caption": row["caption"], "label": row["label"]}


def _small_ranges(src: str, parts: int = 20) -> list:
    with open(src, "rb") as f:
        count = sum(1 for _ in f)
    step = -(-count // parts)
    return [(src, a, min(a + step, count)) for a in range(0, count, step)]


def litdata2(kind: str, src: str, out: str) -> int:
    from litdata import optimize

    if kind == "jpeg":
        items = jpeg_listing(src)
        optimize(fn=_read_image, inputs=items, output_dir=out, num_workers=2, chunk_bytes="64MB")
        return len(items)
    optimize(fn=_small_rows, inputs=_small_ranges(src), output_dir=out, num_workers=2, chunk_bytes="64MB")
    return sum(1 for _ in open(src, "rb"))


def mds(kind: str, src: str, out: str) -> int:
    from streaming import MDSWriter

    n = 0
    if kind == "jpeg":
        with MDSWriter(out=out, columns={"image": "bytes", "label": "int"}, size_limit=CHUNK) as sink:
            for item in jpeg_listing(src):
                sink.write(_read_image(item))
                n += 1
        return n
    with MDSWriter(out=out, columns={"caption": "str", "label": "int"}, size_limit=CHUNK) as sink:
        for row in json_lines(src):
            sink.write({"caption": row["caption"], "label": row["label"]})
            n += 1
    return n


def webdataset(kind: str, src: str, out: str) -> int:
    import webdataset as wds

    os.makedirs(out, exist_ok=True)
    n = 0
    with wds.ShardWriter(os.path.join(out, "shard-%06d.tar"), maxsize=CHUNK, maxcount=10**9, verbose=0) as sink:
        if kind == "jpeg":
            for path, label in jpeg_listing(src):
                with open(path, "rb") as f:
                    sink.write({"__key__": f"{n:08d}", "jpg": f.read(), "cls": label})
                n += 1
        else:
            for row in json_lines(src):
                sink.write({"__key__": row["__key__"], "txt": row["caption"], "cls": row["label"]})
                n += 1
    return n


def _stub_torchvision() -> None:
    """Streaming imports its vision datasets (torchvision) on ``import streaming``; no torchvision build matches
    torch 2.13 here, and MDSWriter uses none of it: a stub module lets the import through."""
    import importlib.util
    import types

    if importlib.util.find_spec("torchvision") is not None:
        return
    import importlib.machinery

    tv = types.ModuleType("torchvision")
    datasets, transforms, functional = (types.ModuleType(f"torchvision.{n}") for n in
                                        ("datasets", "transforms", "transforms.functional"))  # fmt: skip
    for module in (tv, datasets, transforms, functional):  # a spec, for libraries that probe with find_spec
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    datasets.VisionDataset = datasets.CIFAR10 = type("VisionDataset", (), {})
    functional.to_tensor = None
    tv.datasets, tv.transforms, transforms.functional = datasets, transforms, functional
    sys.modules.update({"torchvision": tv, "torchvision.datasets": datasets, "torchvision.transforms": transforms,
                        "torchvision.transforms.functional": functional})


IMPORTS = {"litdata2": "litdata", "mds": "streaming", "webdataset": "webdataset",
           "shardstream_local1": "shardstream.convert", "shardstream_local2": "shardstream.convert",
           "shardstream_dask2": "distributed", "shardstream_noindex2": "shardstream.convert"}


def child(name: str, kind: str, src: str, out: str) -> None:
    """Run one contender; the library is imported before the clock starts (imports are not conversion)."""
    if name == "mds":
        _stub_torchvision()
    if name.startswith("shardstream"):
        sys.path.insert(0, str(ROOT / "src"))
        __import__("shardstream.convert")
    __import__(IMPORTS[name])
    import resource

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    def own() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    start, cpu_start, own_start = time.perf_counter(), cpu(), own()
    samples = globals()[name](kind, src, out)
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu": cpu() - cpu_start, "samples": samples,
                      "parent": own() - own_start, **SPLIT}))  # fmt: skip


# -- driver -------------------------------------------------------------------------------------------------------


#: the environment of the shardstream rows: no flush to disk before the rename, as the peers (see the docstring),
#: except the row that shows the library's default
ROW_ENV = {"shardstream x2 fsync (default)": {"SHARDSTREAM_FSYNC": "1"}}
NO_FSYNC = {"SHARDSTREAM_FSYNC": "0"}
SPLITS: dict[tuple[str, str], dict] = {}  # (row, kind) -> the CPU split of its last run (shardstream rows)


def run(row: str, kind: str, src: str) -> tuple[tuple[float, float] | None, str]:
    venv, name = CONTENDERS[row]
    python = sys.executable if venv is None else str(ROOT / venv / "bin" / "python")
    if not os.path.exists(python):
        return None, f"{venv} is missing (benchmarks/peers/setup.sh)"
    shutil.rmtree(OUT, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") if venv is None else "",
           **(NO_FSYNC if venv is None else {}), **ROW_ENV.get(row, {})}  # fmt: skip
    done = subprocess.run([python, __file__, "--child", name, kind, src, str(OUT)], capture_output=True, env=env,
                          cwd=str(DATA))  # fmt: skip
    shutil.rmtree(OUT, ignore_errors=True)
    if done.returncode != 0:
        return None, done.stderr.decode(errors="replace").strip().splitlines()[-1:][0] if done.stderr else "failed"
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    if "workers" in result:
        SPLITS[(row, kind)] = result
    return (result["seconds"], result["cpu"]), f"{result['samples']} samples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jpeg-mb", type=int, default=200, help="size of the JPEG ImageFolder (default 200)")
    parser.add_argument("--large", action="store_true", help="1 GB of JPEGs (the issue's size)")
    parser.add_argument("--small", type=int, default=200_000, help="number of small samples (default 200k)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the best counts")
    parser.add_argument("--only", nargs="*", help="rows to run (substrings of the row names)")
    parser.add_argument("--sets", nargs="*", default=["jpeg", "small"], help="jpeg, small")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    began = time.perf_counter()
    megabytes = 1024 if args.large else args.jpeg_mb
    sources = {"jpeg": lambda: make_jpegs(megabytes), "small": lambda: make_small(args.small)}
    labels = {"jpeg": f"{megabytes} MB of JPEGs + labels (ImageFolder)",
              "small": f"{args.small:,} small samples (JSON Lines)"}
    rows = [r for r in CONTENDERS if not args.only or any(o in r for o in args.only)]
    table: dict[str, dict[str, tuple[float, float] | None]] = {r: {} for r in rows}
    notes = []
    for kind in args.sets:
        src = sources[kind]()
        for _ in range(args.repeat):  # rounds over all rows: load changes on a shared machine hit every row alike
            for row in rows:
                got, note = run(row, kind, src)
                if got is None:
                    notes.append(f"{row} / {kind}: n/a: {note}")
                    continue
                best = table[row].get(kind)
                table[row][kind] = got if best is None else (min(best[0], got[0]), min(best[1], got[1]))
                print(f"  {labels[kind]:<42} {row:<30} {got[0]:.2f} s wall, {got[1]:.2f} s CPU", file=sys.stderr)
    ref = "shardstream local x2"
    print(f"\n{'contender':<30}" + "".join(f"{k + ' wall':>14}{'x':>7}{'CPU':>9}{'x':>7}" for k in args.sets))
    for row in rows:
        cells = ""
        for kind in args.sets:
            value, base = table[row].get(kind), table.get(ref, {}).get(kind)
            for i in (0, 1):
                cells += f"{'n/a' if value is None else f'{value[i]:.2f} s':>{14 if i == 0 else 9}}"
                cells += f"{'' if value is None or base is None else f'{value[i] / base[i]:.2f}':>7}"
        print(f"{row:<30}{cells}")
    one = table.get("shardstream local x1", {})
    two = table.get(ref, {})
    for kind in args.sets:
        if one.get(kind) and two.get(kind):
            print(f"scaling 1 -> 2 workers, {kind}: {one[kind][0] / two[kind][0]:.2f}x (wall)")
    for (row, kind), split in SPLITS.items():  # CPU evidence for the scaling, which wall times on a shared machine hide
        tasks, parent = sum(split["workers"]), split["parent"]
        busiest = max(split["workers"], default=0.0)
        print(f"CPU split, {row}, {kind}: tasks {tasks:.2f} s on {len(split['workers'])} workers "
              f"({', '.join(f'{w:.2f}' for w in split['workers'])} s), main process {parent:.2f} s, all processes "
              f"{split['cpu']:.2f} s (tasks {tasks / split['cpu']:.0%}); on free cores: (main + tasks) / (main + "
              f"busiest worker) = {(parent + tasks) / (parent + busiest):.2f}x over one worker")
    print("x = contender / shardstream local x2 (above 1: shardstream is faster); CPU = user+system seconds of all "
          "processes of the contender (on a shared machine wall times drift, CPU seconds much less)")
    for kind in args.sets:
        print(f"{kind}: {labels[kind]}")
    print("shardstream rows: SHARDSTREAM_FSYNC=0 (the peers never flush to disk) except 'x2 fsync (default)'")
    for note in notes:
        print(note)
    print(f"benchmark run: {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
