"""One function per contender of bench_peers.py: ``run_X(workload, paths) -> (pass, samples)``, where ``pass()``
iterates the whole data once the library's way and returns a count (samples; bytes for the 4 MiB rows) and
``samples()`` (shuffle rows only) returns the class labels of the last pass in the order they came out.

Everything that happens once (building pipelines and loaders, starting persistent DataLoader workers, numba's
compilation in FFCV, DALI's pipeline build, format conversions) happens before the first pass, which is an
untimed warm-up for every contender alike; bench_peers.py times the passes after it.

The same work in every contender of a row: see ``WORKLOADS`` in bench_peers.py for what each row asks for, and
``rows_of`` below for the per-sample records built from the batch-only libraries (DALI, FFCV).
"""

from __future__ import annotations

import warnings

import torch.utils.data  # CPU torch is in every venv (benchmarks/peers/setup.sh)
from peers_data import collate_jpeg, in_memory, pil_load, pil_work, rows, scaled_load

SHUFFLE_BATCH = 100


class _Recorder:
    """Keeps the labels of the shuffle row's pass (the order the loader produced) for the quality figures."""

    def __init__(self):
        self.labels: list = []

    def batches(self, batches, labels_of):
        self.labels = []
        for b in batches:
            self.labels.extend(int(x) for x in labels_of(b))
            yield b


def _loader(dataset, workers: int = 2):
    """A torch DataLoader over an iterable of ready batches: ``workers`` persistent worker processes."""
    return torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers, persistent_workers=True)


def _library_pipeline(lib, workload: str, paths: list[str]):
    """webdataset and shardstream run the same code: the README idioms of each row."""
    ds = lib.WebDataset(paths, shardshuffle=False)
    if workload == "raw":
        return lambda: sum(1 for _ in ds)
    if workload == "big":
        return lambda: sum(len(s["bin"]) for s in ds)
    if workload == "decode":
        pipe = ds.decode().to_tuple("txt", "cls").batched(256)
        return lambda: rows(pipe)
    if workload == "decode-map":
        pipe = ds.to_tuple("txt", "cls").map_tuple(bytes.decode, int).batched(256)
        return lambda: rows(pipe)
    if workload in ("jpeg1", "jpeg1-scaled"):
        pipe = ds.map(pil_load if workload == "jpeg1" else scaled_load).batched(64)
        return lambda: rows(pipe)
    if workload in ("jpeg2", "jpeg2-scaled"):
        loader = _loader(ds.map(pil_load if workload == "jpeg2" else scaled_load).batched(64))
        return lambda: rows(loader)
    raise KeyError(workload)


def run_webdataset(workload: str, paths: list[str]):
    import webdataset as w

    warnings.simplefilter("ignore")
    if workload == "shuffle":  # webdataset's own defaults: shard shuffle + a 1000-sample buffer (not global)
        rec = _Recorder()
        pipe = w.WebDataset(paths, shardshuffle=True).shuffle(1000).batched(SHUFFLE_BATCH)
        return (lambda: rows(rec.batches(pipe, lambda b: b["cls"] if isinstance(b, dict) else b[1]))), rec
    return _library_pipeline(w, workload, paths), None


def run_shardstream(workload: str, paths: list[str]):
    import shardstream as ss

    if workload == "shuffle":  # the default training configuration: TrainingDataset, shuffle="global"
        from shardstream.training import TrainingDataset

        rec = _Recorder()
        ds = TrainingDataset(paths, batch_size=SHUFFLE_BATCH)
        return (lambda: rows(rec.batches(ds, lambda b: b["cls"]))), rec
    if workload == "big-views":
        ds = ss.WebDataset(paths, shardshuffle=False, zero_copy=True)
        return (lambda: sum(len(s["bin"]) for s in ds)), None
    if workload == "decode-columns":
        from shardstream.codecs import Decoder
        from shardstream.pipeline import tarfile_to_columns

        pipe = ss.DataPipeline(ss.SimpleShardList(paths), tarfile_to_columns(256), ss.map(Decoder().decode_columns))
        return (lambda: rows(pipe)), None
    if workload == "decode-columns-reader":  # the same batches, decoded as they are read
        from shardstream.codecs import Decoder
        from shardstream.pipeline import tarfile_to_columns

        pipe = ss.DataPipeline(ss.SimpleShardList(paths), tarfile_to_columns(256, decode=Decoder()))
        return (lambda: rows(pipe)), None
    if workload == "decode-indexed":  # the shards' sidecar indexes (built once, untimed, as the peers' conversions)
        import os

        from shardstream.codecs import Decoder
        from shardstream.indexed import IndexedDataset, index_shard, sidecar_path

        for p in paths:
            if not os.path.exists(sidecar_path(p)):
                index_shard(p)
        ds = IndexedDataset(paths, decode=Decoder())
        return (lambda: rows(ds.columns(256))), None
    if workload == "jpeg1-threads":  # exact PIL work on 2 threads in one process
        pipe = ss.WebDataset(paths, shardshuffle=False).parallel_map(pil_load, workers=2).batched(64)
        return (lambda: rows(pipe)), None
    return _library_pipeline(ss, workload, paths), None


# -- the limits: the same work on data already in memory, or a plain read of the files -----------------------------


class _PILBatches(torch.utils.data.IterableDataset):
    """The limit with 2 DataLoader workers: each worker runs the plain loop over its half of the batches."""

    def __init__(self, samples: list[dict]):
        self.samples = samples

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        starts = range(0, len(self.samples), 64)
        if info is not None:
            starts = starts[info.id::info.num_workers]
        for i in starts:
            yield collate_jpeg([(pil_work(s["jpg"]), int(s["cls"])) for s in self.samples[i:i + 64]])


def run_limit(workload: str, paths: list[str]):
    if workload == "big":  # every shard read into one reused buffer: the page cache's copy and nothing else
        import os
        import tarfile

        buf = bytearray(max(os.path.getsize(p) for p in paths))
        payload = sum(m.size for p in paths for m in tarfile.open(p))  # credited with the samples' bytes, as all

        def read() -> int:
            for p in paths:
                with open(p, "rb", buffering=0) as f:
                    f.readinto(buf)
            return payload

        return read, None
    samples = in_memory(paths)  # JPEG bytes in memory: the plain PIL loop, batches of 64 (bench_pipeline.py's)
    if workload == "jpeg1":
        return (lambda: rows(collate_jpeg(samples[i:i + 64]) for i in range(0, len(samples), 64))), None
    loader = _loader(_PILBatches(samples))
    return (lambda: rows(loader)), None


def run_floor(workload: str, paths: list[str]):
    """The tar floor of the small rows: each shard mapped and every header touched (checksum checked, size parsed,
    payload skipped) in C, one call per shard, no object made (floor_walk.c, compiled once, untimed)."""
    import ctypes
    import hashlib
    import os
    import pathlib
    import subprocess

    from peers_data import DATA

    source = pathlib.Path(__file__).with_name("floor_walk.c")
    lib = DATA / "floor" / f"floor_walk-{hashlib.sha256(source.read_bytes()).hexdigest()[:12]}.so"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(".tmp")
        subprocess.run([os.environ.get("CC", "cc"), "-O3", "-march=native", "-shared", "-fPIC", "-o", str(tmp),
                        str(source)], check=True)
        tmp.rename(lib)
    walk = ctypes.CDLL(str(lib)).floor_walk
    walk.argtypes, walk.restype = [ctypes.c_char_p], ctypes.c_longlong
    names = [os.fsencode(p) for p in paths]

    def run() -> int:
        total = 0
        for name in names:
            n = walk(name)
            if n < 0:
                raise RuntimeError(f"floor_walk: {name!r} is not a plain tar of ustar headers")
            total += n
        return total

    return run, None


# -- the peers -------------------------------------------------------------------------------------------------------


def run_litdata(workload: str, paths: list[str]):
    import litdata
    from peers_data import litdata_dir

    folder = litdata_dir(paths)
    if workload == "shuffle":
        rec = _Recorder()
        loader = litdata.StreamingDataLoader(litdata.StreamingDataset(folder, shuffle=True), batch_size=SHUFFLE_BATCH,
                                             num_workers=0)
        return (lambda: rows(rec.batches(loader, lambda b: b["cls"]))), rec
    ds = litdata.StreamingDataset(folder)
    if workload == "raw":
        return (lambda: sum(1 for _ in ds)), None
    if workload == "big":  # litdata hands out memoryviews of its chunk: the copy row takes a copy, as it would
        return (lambda: sum(len(bytes(s["bin"])) for s in ds)), None
    if workload == "big-views":
        return (lambda: sum(len(s["bin"]) for s in ds)), None
    if workload == "decode":  # stored as str and int: torch's default collate makes a list and a tensor
        loader = litdata.StreamingDataLoader(ds, batch_size=256, num_workers=0)
        return (lambda: rows(loader)), None
    workers = 2 if workload == "jpeg2" else 0
    loader = litdata.StreamingDataLoader(ds, batch_size=64, num_workers=workers, collate_fn=collate_jpeg,
                                         persistent_workers=workers > 0)
    return (lambda: rows(loader)), None


def run_dali(workload: str, paths: list[str]):
    """DALI's webdataset reader on the CPU (device_id=None); JPEG work with DALI's own CPU decoder and resize.
    The reader hands out uint8 tensors: the raw row builds a dict per sample of those tensors, the decode row
    decodes them in Python (UTF-8 text, decimal label), as the tar-reading libraries do."""
    import numpy as np
    from nvidia.dali import fn, pipeline_def, types

    threads = 2 if workload == "jpeg2" else 1
    batch = {"big": 4, "jpeg1": 64, "jpeg2": 64, "shuffle": SHUFFLE_BATCH}.get(workload, 256)
    ext = {"big": ["bin"], "jpeg1": ["jpg", "cls"], "jpeg2": ["jpg", "cls"]}.get(workload, ["txt", "cls"])

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, exec_dynamic=True)
    def pipe():
        fields = fn.readers.webdataset(paths=paths, ext=ext, missing_component_behavior="error", name="reader",
                                       dtypes=[types.UINT8] * len(ext), random_shuffle=workload == "shuffle",
                                       pad_last_batch=True)
        fields = fields if isinstance(fields, (list, tuple)) else [fields]  # one extension: one DataNode
        if workload in ("jpeg1", "jpeg2"):
            image = fn.decoders.image(fields[0], device="cpu", output_type=types.RGB)
            image = fn.resize(image, resize_shorter=224, interp_type=types.INTERP_LINEAR, antialias=True)
            return fn.crop(image, crop=(224, 224)), fields[1]
        return tuple(fields)

    p = pipe()
    p.build()
    total = p.reader_meta("reader")["epoch_size"]
    rec = _Recorder()

    def batches():
        n = 0
        while n < total:  # the last batch is padded: only its first total - n samples count
            out = p.run()
            size = min(len(out[0]), total - n)
            n += size
            yield out, size

    def per_sample(out, size):
        txt, cls = out
        return [{"txt": txt[i], "cls": cls[i]} for i in range(size)]

    def decoded(out, size):
        txt, cls = out
        return ([np.asarray(txt[i]).tobytes().decode() for i in range(size)],
                [int(np.asarray(cls[i]).tobytes()) for i in range(size)])

    if workload == "raw":
        return (lambda: sum(len(per_sample(*b)) for b in batches())), None
    if workload == "decode":
        return (lambda: rows(decoded(*b) for b in batches())), None
    if workload == "big":
        return (lambda: sum(int(out[0][i].shape()[0]) for out, size in batches() for i in range(size))), None
    if workload == "shuffle":
        return (lambda: rows(rec.batches((decoded(*b) for b in batches()), lambda b: b[1]))), rec
    return (lambda: sum(size for _, size in batches())), None


def run_ffcv(workload: str, paths: list[str]):
    """FFCV's Loader on the .beton (OS page cache); JPEG work with FFCV's own decoder,
    ``CenterCropRGBImageDecoder((224, 224), ratio=1)`` (centre square of the shorter side, resized by OpenCV);
    workers are FFCV's threads (2 for jpeg2). FFCV hands out batches only (txt as a zero-padded uint8 matrix): the
    raw row builds a dict per sample of the rows, the decode row decodes the text in Python."""
    from ffcv.fields.basics import IntDecoder
    from ffcv.fields.bytes import BytesDecoder
    from ffcv.fields.rgb_image import CenterCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from peers_data import ffcv_file

    path = ffcv_file(paths)
    batch = {"big": 4, "jpeg1": 64, "jpeg2": 64, "shuffle": SHUFFLE_BATCH}.get(workload, 256)
    if workload in ("jpeg1", "jpeg2"):
        pipelines = {"jpg": [CenterCropRGBImageDecoder((224, 224), ratio=1.0)], "cls": [IntDecoder()]}
    elif workload == "big":
        pipelines = {"bin": [BytesDecoder()]}
    else:
        pipelines = {"txt": [BytesDecoder()], "cls": [IntDecoder()]}
    order = OrderOption.RANDOM if workload == "shuffle" else OrderOption.SEQUENTIAL
    loader = Loader(path, batch_size=batch, num_workers=2 if workload == "jpeg2" else 1, os_cache=True,
                    order=order, drop_last=False, pipelines=pipelines)
    if workload == "raw":
        return (lambda: sum(len([{"txt": t, "cls": c} for t, c in zip(*b, strict=True)]) for b in loader)), None
    if workload == "decode":
        def decoded(b):
            return [t.tobytes().rstrip(b"\0").decode() for t in b[0]], b[1].reshape(-1)

        return (lambda: rows(decoded(b) for b in loader)), None
    if workload == "big":
        return (lambda: sum(int(b[0].shape[0]) * int(b[0].shape[1]) for b in loader)), None
    if workload == "shuffle":
        rec = _Recorder()
        return (lambda: rows(rec.batches(loader, lambda b: b[1].reshape(-1)))), rec
    return (lambda: rows(loader)), None


def run_streaming(workload: str, paths: list[str]):
    """MosaicML Streaming's StreamingDataset (local MDS shards, its default shuffle) + a torch DataLoader."""
    import torch.utils.data
    from peers_data import streaming_dir

    folder = streaming_dir(paths)  # stubs torchvision before streaming is imported
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    ds = StreamingDataset(local=folder, shuffle=workload == "shuffle", batch_size=SHUFFLE_BATCH)
    loader = torch.utils.data.DataLoader(ds, batch_size=SHUFFLE_BATCH, num_workers=0)
    rec = _Recorder()
    return (lambda: rows(rec.batches(loader, lambda b: b["cls"]))), rec


RUNNERS = {"limit": run_limit, "floor": run_floor, "webdataset 1.0.2": run_webdataset, "shardstream": run_shardstream,
           "litdata": run_litdata, "DALI (CPU)": run_dali, "FFCV": run_ffcv, "Streaming": run_streaming}
