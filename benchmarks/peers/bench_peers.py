"""Issue 7's workloads in every peer library that is installed, one table of ratios against webdataset 1.0.2.

    benchmarks/peers/setup.sh                           # once: .venv-peers-{litdata,dali,ffcv} (make bench-peers)
    .venv-bench/bin/python benchmarks/peers/bench_peers.py [--quick] [--only WORKLOAD ...]

Every contender runs in its own interpreter (its own venv), one workload at a time, on the same generated data
(``bench-data/``: the shards of benchmarks/_common.py; peers that need their own format convert those shards
once into ``bench-data/peers/<peer>/``, untimed). webdataset and shardstream run in ``.venv-bench``; a peer whose
venv is missing, or that fails, shows ``n/a`` (the reason is printed under the table). Rates are samples/s
(MB/s for 4 MiB samples); each cell is the best of ``--repeat`` passes after one warm-up pass of the data.

Workloads (the rows): raw iteration of 200k x ~250 B .txt+.cls as per-sample records; decode txt+cls in batches
of 256; JPEG -> 224x224 RGB (decode, centre crop, bilinear resize) in batches of 64 in one process, and with 2
workers or threads; raw iteration of 4 MiB samples; ``write``: seconds to write all four generated datasets
(200k x ~250 B txt+cls, 2,000 JPEGs, 128 x 4 MiB, 40k x 8 KiB) in each library's own format, and the output
size against the minimal tar size (see ``run_write``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))  # benchmarks/_common.py (which puts src/ on the path)

from _common import DATA, big_shards, jpeg_shards, small_shards, warm  # noqa: E402

SIZE = 224
WORKLOADS = {
    "raw": "raw iteration, 200k x ~250 B .txt+.cls (samples/s)",
    "decode": "decode txt+cls, batches of 256 (samples/s); shardstream: indexed shards, `IndexedDataset.columns`",
    "decode-stream": "the same, shardstream streaming the tar: `tarfile_to_columns` + `decode_columns`",
    "jpeg1": "JPEG -> 224x224 RGB, batches of 64, one process (samples/s)",
    "jpeg2": "the same, 2 workers or threads (samples/s)",
    "jpeg1s": "JPEG, one process; shardstream: opt-in `decode_resized(scaled=True)` (others as in jpeg1)",
    "jpeg2s": "the same, 2 threads: `parallel_map(workers=2)` (others as in jpeg2)",
    "big": "raw iteration, 4 MiB samples (MB/s)",
    "write": "writing all four datasets in the library's format (s, lower is better; x = webdataset s / own s)",
}
CONTENDERS = {  # name -> venv
    "webdataset 1.0.2": ".venv-bench",
    "shardstream": ".venv-bench",
    "litdata": ".venv-peers-litdata",
    "DALI (CPU)": ".venv-peers-dali",
    "FFCV": ".venv-peers-ffcv",
}


def data(workload: str, quick: bool) -> list[str]:
    if workload in ("raw", "decode", "decode-stream"):
        return small_shards(20_000 if quick else 200_000)
    if workload == "big":
        return big_shards(32 if quick else 128)
    if workload == "write":
        return [p for group in write_sets(quick) for p in group[1]]
    return jpeg_shards(200 if quick else 2000)


def pil_work(jpg) -> object:
    """The JPEG work of every Python-side contender (benchmarks/bench_pipeline.py's, repeated to stay standalone)."""
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(jpg)) as img:
        img.load()
        img = img.convert("RGB") if img.mode != "RGB" else img
        w, h = img.size
        side = min(w, h)
        box = ((w - side) / 2, (h - side) / 2, (w + side) / 2, (h + side) / 2)
        return np.asarray(img.resize((SIZE, SIZE), Image.Resampling.BILINEAR, box=box))


def pil_load(sample: dict) -> tuple:
    return pil_work(sample["jpg"]), int(sample["cls"])


def rows(batches) -> int:
    n = 0
    for b in batches:
        first = b[0] if isinstance(b, (list, tuple)) else next(iter(b.values()))
        n += len(first)
    return n


# -- one function per (contender, workload): returns the count (samples, or bytes for "big") -----------------------


def run_webdataset(workload: str, paths: list[str]):
    import webdataset as w

    warnings.simplefilter("ignore")
    ds = w.WebDataset(paths, shardshuffle=False)
    if workload == "raw":
        return lambda: sum(1 for _ in ds)
    if workload == "big":
        return lambda: sum(len(s["bin"]) for s in ds)
    if workload in ("decode", "decode-stream"):
        return lambda: rows(ds.decode().to_tuple("txt", "cls").batched(256))
    if workload == "jpeg1":
        return lambda: rows(ds.map(pil_load).batched(64))
    return _loader(ds.map(pil_load).batched(64))


def run_shardstream(workload: str, paths: list[str]):
    import shardstream as wds
    from shardstream.codecs import Decoder
    from shardstream.pipeline.parallel import parallel_map, tarfile_to_columns

    if workload == "raw":
        return lambda: sum(1 for _ in wds.WebDataset(paths, shardshuffle=False))
    if workload == "big":
        return lambda: sum(len(s["bin"]) for s in wds.WebDataset(paths, shardshuffle=False, zero_copy=True))
    if workload == "decode":  # the shards' sidecar indexes (built once, untimed, as the peers' conversions)
        from shardstream.indexed import IndexedDataset, index_shard, sidecar_path

        for p in paths:
            if not os.path.exists(sidecar_path(p)):
                index_shard(p)
        ds = IndexedDataset(paths, decode=Decoder())
        return lambda: rows(ds.columns(256))
    if workload == "decode-stream":
        decoder = Decoder()
        return lambda: rows(wds.DataPipeline(wds.SimpleShardList(paths), tarfile_to_columns(256),
                                             wds.map(decoder.decode_columns)))
    ds = wds.WebDataset(paths, shardshuffle=False)
    if workload in ("jpeg1s", "jpeg2s"):  # libjpeg-turbo's M/8 scaled decode + OpenCV resize (the `jpeg` extra)
        from shardstream.codecs import decode_resized

        def scaled_load(sample: dict) -> tuple:
            return decode_resized(sample["jpg"], SIZE, scaled=True), int(sample["cls"])

        if workload == "jpeg1s":
            return lambda: rows(ds.map(scaled_load).batched(64))
        return lambda: rows(ds.compose(parallel_map(scaled_load, workers=2)).batched(64))
    if workload == "jpeg1":
        return lambda: rows(ds.map(pil_load).batched(64))
    return lambda: rows(ds.compose(parallel_map(pil_load, workers=2)).batched(64))  # 2 threads, one process


def _loader(dataset):
    import torch.utils.data

    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2, persistent_workers=True)
    return lambda: rows(loader)


def litdata_dir(workload: str, paths: list[str]) -> str:
    """The shards converted once with ``litdata.optimize`` (untimed): same samples, litdata's chunk format."""
    import litdata

    out = DATA / "peers" / "litdata" / pathlib.Path(paths[0]).parent.name
    if not (out / "DONE").exists():
        import shutil

        shutil.rmtree(out, ignore_errors=True)
        litdata.optimize(fn=_litdata_samples, inputs=list(paths), output_dir=str(out), chunk_bytes="64MB",
                         num_workers=1, mode="overwrite")
        (out / "DONE").write_text("ok")
    return str(out)


def _litdata_samples(path: str):
    from shardstream.samples import iter_samples

    with open(path, "rb") as f:
        for s in iter_samples(f, path):
            if "bin" in s:
                yield {"bin": s["bin"]}
            elif "jpg" in s:
                yield {"jpg": s["jpg"], "cls": int(s["cls"])}
            else:
                yield {"txt": s["txt"].decode(), "cls": int(s["cls"])}


def run_litdata(workload: str, paths: list[str]):
    import litdata

    ds = litdata.StreamingDataset(litdata_dir(workload, paths))
    if workload == "raw":
        return lambda: sum(1 for _ in ds)
    if workload == "big":
        return lambda: sum(len(s["bin"]) for s in ds)
    if workload == "decode":
        loader = litdata.StreamingDataLoader(ds, batch_size=256, num_workers=0)
        return lambda: sum(len(b["cls"]) for b in loader)
    if workload == "jpeg1":
        loader = litdata.StreamingDataLoader(ds, batch_size=64, num_workers=0, collate_fn=_collate_jpeg)
        return lambda: rows(loader)
    loader = litdata.StreamingDataLoader(ds, batch_size=64, num_workers=2, collate_fn=_collate_jpeg,
                                         persistent_workers=True)
    return lambda: rows(loader)


def _collate_jpeg(samples: list[dict]):
    import numpy as np

    return np.stack([pil_work(s["jpg"]) for s in samples]), np.array([s["cls"] for s in samples])


def run_dali(workload: str, paths: list[str]):
    """DALI's webdataset reader on the CPU (device_id=None); JPEG work with DALI's own CPU decoder and resize."""
    from nvidia.dali import fn, pipeline_def, types

    threads = 2 if workload == "jpeg2" else 1
    batch = {"raw": 256, "decode": 256, "big": 4, "jpeg1": 64, "jpeg2": 64}[workload]
    ext = {"raw": ["txt", "cls"], "decode": ["txt", "cls"], "big": ["bin"]}.get(workload, ["jpg", "cls"])

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, exec_dynamic=True)
    def pipe():
        fields = fn.readers.webdataset(paths=paths, ext=ext, missing_component_behavior="error", name="reader",
                                       dtypes=[types.UINT8] * len(ext))
        fields = fields if isinstance(fields, (list, tuple)) else [fields]  # one extension: one DataNode
        if workload in ("jpeg1", "jpeg2"):
            image = fn.decoders.image(fields[0], device="cpu", output_type=types.RGB)
            image = fn.resize(image, resize_shorter=SIZE, interp_type=types.INTERP_LINEAR, antialias=True)
            return fn.crop(image, crop=(SIZE, SIZE)), fields[1]
        return tuple(fields)

    p = pipe()
    p.build()
    total = p.reader_meta("reader")["epoch_size"]

    def epoch() -> int:
        n = nbytes = 0
        while n < total:
            out = p.run()
            size = len(out[0])
            if workload == "big":
                nbytes += sum(int(out[0][i].shape()[0]) for i in range(size))
            n += size
        return nbytes if workload == "big" else min(n, total)

    return epoch


def ffcv_file(workload: str, paths: list[str]) -> str:
    """The shards converted once to FFCV's ``.beton`` with ``DatasetWriter`` (untimed). txt: ``BytesField`` (UTF-8),
    cls: ``IntField``, 4 MiB bin: ``BytesField``, jpg: ``RGBImageField(write_mode="jpg", jpeg_quality=90)``, which
    takes decoded pixels only, so FFCV re-encodes each JPEG (at the quality of the source JPEGs)."""
    from ffcv.fields import BytesField, IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    out = DATA / "peers" / "ffcv" / (pathlib.Path(paths[0]).parent.name + ".beton")
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        samples = _ffcv_samples(paths)
        first = samples.ds[0]
        if "bin" in first:
            fields = {"bin": BytesField()}
        elif "jpg" in first:
            fields = {"jpg": RGBImageField(write_mode="jpg", jpeg_quality=90), "cls": IntField()}
        else:
            fields = {"txt": BytesField(), "cls": IntField()}
        tmp = out.with_suffix(".tmp")
        DatasetWriter(str(tmp), fields, num_workers=2).from_indexed_dataset(samples)
        tmp.rename(out)
    return str(out)



def _as_arrays(s: dict) -> tuple:
    """A sample as the arrays a loader hands on: bytes as uint8, JPEGs decoded to RGB, labels as int."""
    import io

    import numpy as np
    from PIL import Image

    if "bin" in s:
        return (np.frombuffer(s["bin"], np.uint8),)
    if "jpg" in s:
        with Image.open(io.BytesIO(s["jpg"])) as img:
            return np.asarray(img.convert("RGB")), int(s["cls"])
    return np.frombuffer(s["txt"], np.uint8), int(s["cls"])

class _ffcv_samples:
    """The samples of the shards as FFCV's writer wants them: a map-style dataset of tuples in field order."""

    def __init__(self, paths: list[str]):
        from shardstream.indexed import IndexedDataset, index_shard, sidecar_path

        for p in paths:
            if not os.path.exists(sidecar_path(p)):
                index_shard(p)
        self.ds = IndexedDataset(paths)

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int):
        return _as_arrays(self.ds[i])


def run_ffcv(workload: str, paths: list[str]):
    """FFCV's Loader on the .beton (sequential order, OS page cache); JPEG work with FFCV's own decoder,
    ``CenterCropRGBImageDecoder((224, 224), ratio=1)`` (centre square of the shorter side, resized by OpenCV);
    workers are FFCV's threads (1, or 2 for jpeg2). FFCV hands out batches only: raw iteration walks the rows."""
    from ffcv.fields.basics import IntDecoder
    from ffcv.fields.bytes import BytesDecoder
    from ffcv.fields.rgb_image import CenterCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption

    path = ffcv_file(workload, paths)
    batch = {"raw": 256, "decode": 256, "big": 4, "jpeg1": 64, "jpeg2": 64}[workload]
    if workload in ("jpeg1", "jpeg2"):
        pipelines = {"jpg": [CenterCropRGBImageDecoder((SIZE, SIZE), ratio=1.0)], "cls": [IntDecoder()]}
    elif workload == "big":
        pipelines = {"bin": [BytesDecoder()]}
    else:
        pipelines = {"txt": [BytesDecoder()], "cls": [IntDecoder()]}
    loader = Loader(path, batch_size=batch, num_workers=2 if workload == "jpeg2" else 1, os_cache=True,
                    order=OrderOption.SEQUENTIAL, drop_last=False, pipelines=pipelines)
    if workload == "raw":
        return lambda: sum(sum(1 for _ in zip(*b)) for b in loader)
    if workload == "big":
        return lambda: sum(int(b[0].shape[0]) * int(b[0].shape[1]) for b in loader)
    return lambda: sum(len(b[0]) for b in loader)


# -- the write workload ---------------------------------------------------------------------------------------------


def write_sets(quick: bool) -> list[tuple[str, list[str], int]]:
    """(name, source shards, samples per shard) of the four datasets the harness generates."""
    n_med = 4000 if quick else 40_000
    return [("small", small_shards(20_000 if quick else 200_000), 10_000),
            ("jpeg", jpeg_shards(200 if quick else 2000), 500),
            ("big", big_shards(32 if quick else 128), 32),
            ("medium", big_shards(n_med, 8192, 10_000), 10_000)]


def load_samples(paths: list[str]) -> list[dict]:
    """The source shards' samples in memory, fields as ``bytes`` (untimed: every writer gets the same input)."""
    from shardstream.samples import iter_samples

    out = []
    for path in paths:
        with open(path, "rb") as f:
            for s in iter_samples(f, path):
                out.append({k: (v if k.startswith("__") else bytes(v)) for k, v in s.items() if k != "__url__"})
    return out


def minimal_tar_size(samples: list[dict], shards: int) -> int:
    """A 512-byte header per member plus its data padded to 512, and the 1,024-byte end record per shard."""
    size = 1024 * shards
    for sample in samples:
        for name, value in sample.items():
            if not name.startswith("__"):
                size += 512 + len(value) + (-len(value) % 512)
    return size


def write_tar(module, folder: str, samples: list[dict], per_shard: int) -> None:
    kwargs = {"verbose": 0} if module.__name__ == "webdataset" else {}
    with module.ShardWriter(os.path.join(folder, "shard-%06d.tar"), maxcount=per_shard, maxsize=1 << 40,
                            **kwargs) as sink:
        for sample in samples:
            sink.write(sample)


def write_litdata(folder: str, samples: list[dict], per_shard: int) -> None:
    """litdata's writer API (what ``optimize`` runs in each worker), in process, 64 MB chunks; bytes as-is."""
    from litdata.streaming.writer import BinaryWriter

    writer = BinaryWriter(folder, chunk_bytes="64MB")
    for i, sample in enumerate(samples):
        writer.add_item(i, {k: v for k, v in sample.items() if not k.startswith("__")})
    writer.done()
    writer.merge()


class _ffcv_memory:
    """In-memory samples as FFCV's writer wants them (tuples in field order); JPEGs decoded to pixels."""

    def __init__(self, samples: list[dict]):
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        return _as_arrays(self.samples[i])


def write_ffcv(folder: str, samples: list[dict], per_shard: int) -> None:
    """One ``.beton`` per dataset, fields as in ``ffcv_file`` (jpg re-encoded by RGBImageField), 2 workers."""
    from ffcv.fields import BytesField, IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    first = samples[0]
    if "bin" in first:
        fields = {"bin": BytesField()}
    elif "jpg" in first:
        fields = {"jpg": RGBImageField(write_mode="jpg", jpeg_quality=90), "cls": IntField()}
    else:
        fields = {"txt": BytesField(), "cls": IntField()}
    DatasetWriter(os.path.join(folder, "data.beton"), fields, num_workers=2).from_indexed_dataset(
        _ffcv_memory(samples))


def run_write(contender: str, quick: bool) -> dict:
    """Times ``contender`` writing the four datasets (held in memory) into a fresh folder under bench-data/;
    returns total seconds, seconds per dataset, and output bytes / minimal tar bytes (all four together)."""
    import shutil
    import tempfile

    if contender == "webdataset 1.0.2":
        import webdataset

        write = lambda *a: write_tar(webdataset, *a)  # noqa: E731
    elif contender == "shardstream":
        import shardstream

        write = lambda *a: write_tar(shardstream, *a)  # noqa: E731
    elif contender == "litdata":
        write = write_litdata
    elif contender == "FFCV":
        write = write_ffcv
    else:
        raise RuntimeError(f"{contender} has no writer")
    warnings.simplefilter("ignore")
    per, total, out_bytes, min_bytes = {}, 0.0, 0, 0
    for name, paths, per_shard in write_sets(quick):
        samples = load_samples(paths)
        folder = tempfile.mkdtemp(dir=DATA, prefix=f"write-{name}-")
        try:
            start = time.perf_counter()
            write(folder, samples, per_shard)
            per[name] = time.perf_counter() - start
            total += per[name]
            out_bytes += sum(f.stat().st_size for f in pathlib.Path(folder).rglob("*") if f.is_file())
            min_bytes += minimal_tar_size(samples, len(paths))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        del samples
    return {"rate": total, "per": per, "size": out_bytes / min_bytes}


RUNNERS = {"webdataset 1.0.2": run_webdataset, "shardstream": run_shardstream, "litdata": run_litdata,
           "DALI (CPU)": run_dali, "FFCV": run_ffcv}


def worker(contender: str, workload: str, quick: bool, repeat: int) -> None:
    """In the contender's venv: one warm-up pass, then the best of ``repeat``; prints a JSON line."""
    if workload == "write":  # one pass: seconds, not a rate
        print(json.dumps(run_write(contender, quick)))
        return
    paths = data(workload, quick)
    warm(paths)
    if contender != "shardstream":  # the scaled rows are shardstream's variant; the others run their JPEG work
        workload = {"jpeg1s": "jpeg1", "jpeg2s": "jpeg2"}.get(workload, workload)
    fn = RUNNERS[contender](workload, paths)
    fn()
    best = 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        n = fn()
        best = max(best, n / (time.perf_counter() - start))
    print(json.dumps({"rate": best / 1e6 if workload == "big" else best}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data (a smoke run)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), help="some workloads only")
    parser.add_argument("--worker", nargs=2, metavar=("CONTENDER", "WORKLOAD"), help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per contender and workload")
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.quick, args.repeat)
        return 0
    workloads = args.only or list(WORKLOADS)
    for w in workloads:
        data(w, args.quick)  # generate once, before any contender runs
    results: dict[str, dict[str, float | None]] = {w: {} for w in workloads}
    notes: list[str] = []
    details: dict[str, dict] = {}
    for w in workloads:
        for name, venv in CONTENDERS.items():
            if w == "decode-stream" and name not in ("webdataset 1.0.2", "shardstream"):
                results[w][name] = None  # a shardstream-only row: its streaming path next to the indexed one
                continue
            if w == "write" and name == "DALI (CPU)":
                results[w][name] = None  # DALI reads datasets, it writes none
                continue
            if w in ("jpeg1s", "jpeg2s") and name not in ("webdataset 1.0.2", "shardstream", "FFCV"):
                results[w][name] = None  # shardstream's opt-in variant, next to the baseline and FFCV
                continue
            python = ROOT / venv / "bin" / "python"
            if not python.exists():
                results[w][name] = None
                note = f"{name}: {venv} is missing (benchmarks/peers/setup.sh)"
                if note not in notes:
                    notes.append(note)
                continue
            cmd = [str(python), __file__, "--worker", name, w, "--repeat", str(args.repeat)]
            try:
                done = subprocess.run(cmd + (["--quick"] if args.quick else []), capture_output=True, text=True,
                                      timeout=args.timeout, cwd=ROOT, env=dict(os.environ, PYTHONWARNINGS="ignore"))
            except subprocess.TimeoutExpired:
                results[w][name] = None
                notes.append(f"{name}, {w}: over {args.timeout:.0f} s")
                continue
            if done.returncode == 0:
                line = json.loads(done.stdout.strip().splitlines()[-1])
                results[w][name] = line["rate"]
                if w == "write":
                    details[name] = line
            else:
                results[w][name] = None
                last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                notes.append(f"{name}, {w}: failed: {last[:200]}")
            print(f"  {w:7} {name:17} {results[w][name] or 'n/a'}", file=sys.stderr, flush=True)
    print(table(results))
    for name, d in details.items():
        per = ", ".join(f"{k} {v:.2f} s" for k, v in d["per"].items())
        print(f"- write, {name}: {d['rate']:.2f} s ({per}); output {d['size']:.4f}x the minimal tar size")
    for note in notes:
        print(f"- {note}")
    return 0


def table(results: dict[str, dict[str, float | None]]) -> str:
    names = list(CONTENDERS)
    lines = ["| workload | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for w, rates in results.items():
        base = rates.get("webdataset 1.0.2")
        cells = []
        for name in names:
            rate = rates.get(name)
            if rate is None:
                cells.append("n/a")
            elif w == "write":
                cells.append(f"{rate:.2f} s" + (f" ({base / rate:.2f}x)" if base and name != "webdataset 1.0.2" else ""))
            elif name == "webdataset 1.0.2" or not base:
                cells.append(f"{rate:,.0f}")
            else:
                cells.append(f"{rate:,.0f} ({rate / base:.2f}x)")
        lines.append(f"| {WORKLOADS[w]} | " + " | ".join(cells) + " |")
    return "## issue-7 workloads, ratios against webdataset 1.0.2 (same data, one run)\n" + "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
