"""The data of bench_peers.py: the generated shards of each workload, the shared JPEG work, and each peer's copy of
the shards in its own format (converted once into ``bench-data/peers/<peer>/``, untimed, reused between runs).

Every contender reads the same samples: the tar shards of ``benchmarks/_common.py`` (webdataset, shardstream, DALI)
or a conversion of exactly those samples (litdata, FFCV, MosaicML Streaming).
"""

from __future__ import annotations

import io
import pathlib
import random
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/_common.py (which puts src/ on the path)

from _common import DATA, big_shards, jpeg_shards, small_shards  # noqa: E402

SIZE = 224
CLASSES = 1000


def sorted_shards(n_samples: int) -> list[str]:
    """The shuffle workload's data: ``n_samples`` of a ~250 B ``.txt`` and a ``.cls``, written sorted by class
    (sample ``n`` has class ``n * 1000 // n_samples``), so that the order a loader hands out shows its shuffle."""
    from shardstream.writer import ShardWriter

    folder = DATA / f"sorted-{n_samples}"
    if not (folder / "DONE").exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(1)
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
        with ShardWriter(str(folder / "sorted-%06d.tar"), maxcount=max(1, n_samples // 20)) as sink:
            for n in range(n_samples):
                text = " ".join(rng.choice(words) for _ in range(42))[:250]
                sink.write({"__key__": f"s{n:08d}", "txt": text, "cls": str(n * CLASSES // n_samples)})
        (folder / "DONE").write_text("ok")
    return sorted(str(p) for p in folder.glob("sorted-*.tar"))


def data(workload: str, quick: bool) -> list[str]:
    """The shards of a workload (generated once): the kind of data is the part of the name before the dash."""
    kind = workload.split("-")[0]
    if kind in ("raw", "decode"):
        return small_shards(20_000 if quick else 200_000)
    if kind == "big":
        return big_shards(32 if quick else 128)
    if kind == "shuffle":
        return sorted_shards(20_000 if quick else 200_000)
    return jpeg_shards(256, per_shard=64) if quick else jpeg_shards(2000)  # 4 shards: 2 per DataLoader worker


def pil_work(jpg) -> object:
    """The exact JPEG work of every Python-side contender: decode, centred square crop, bilinear resize to 224."""
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


def scaled_load(sample: dict) -> tuple:
    """shardstream's opt-in scaled decode (libjpeg-turbo M/8 scale + OpenCV resize; the `jpeg` extra)."""
    from shardstream.codecs import decode_resized

    return decode_resized(sample["jpg"], SIZE, scaled=True), int(sample["cls"])


def collate_jpeg(samples: list) -> tuple:
    """A batch of (pixels, label) pairs or of ``{"jpg", "cls"}`` dicts -> (N x 224 x 224 x 3 array, labels)."""
    import numpy as np

    if samples and isinstance(samples[0], dict):
        samples = [(pil_work(s["jpg"]), int(s["cls"])) for s in samples]
    return np.stack([s[0] for s in samples]), np.array([s[1] for s in samples])


def rows(batches) -> int:
    """The number of samples in an iterable of batches (tuples/lists of columns, or dicts of columns)."""
    n = 0
    for b in batches:
        first = b[0] if isinstance(b, (list, tuple)) else next(iter(b.values()))
        n += len(first)
    return n


def in_memory(paths: list[str]) -> list[dict]:
    """The shards' samples as dicts of ``bytes`` (the limits' input, and what the converters write)."""
    from shardstream.samples import iter_samples

    out = []
    for path in paths:
        with open(path, "rb") as f:
            for s in iter_samples(f, path):
                out.append({k: (v if k.startswith("__") else bytes(v)) for k, v in s.items() if k != "__url__"})
    return out


def _typed(s: dict) -> dict:
    """A sample in a typed format's natural types: txt as str, cls as int, binary fields as bytes."""
    if "bin" in s:
        return {"bin": s["bin"]}
    if "jpg" in s:
        return {"jpg": s["jpg"], "cls": int(s["cls"])}
    return {"txt": s["txt"].decode(), "cls": int(s["cls"])}


def _done(out: pathlib.Path) -> bool:
    return (out / "DONE").exists()


# -- litdata ---------------------------------------------------------------------------------------------------------


def _litdata_samples(path: str):
    from shardstream.samples import iter_samples

    with open(path, "rb") as f:
        for s in iter_samples(f, path):
            yield _typed({k: bytes(v) for k, v in s.items() if not k.startswith("__")})


def litdata_dir(paths: list[str]) -> str:
    """The shards converted once with ``litdata.optimize`` (txt as str, cls as int, bytes as-is; 64 MB chunks)."""
    import litdata

    out = DATA / "peers" / "litdata" / pathlib.Path(paths[0]).parent.name
    if not _done(out):
        import shutil

        shutil.rmtree(out, ignore_errors=True)
        litdata.optimize(fn=_litdata_samples, inputs=list(paths), output_dir=str(out), chunk_bytes="64MB",
                         num_workers=1, mode="overwrite")
        (out / "DONE").write_text("ok")
    return str(out)


# -- FFCV ------------------------------------------------------------------------------------------------------------


def _as_arrays(s: dict, pad: bool) -> tuple:
    """A sample as FFCV's writer takes it (field order): bytes as uint8, JPEGs decoded to RGB, labels as int."""
    import numpy as np
    from PIL import Image

    if "bin" in s:
        return (np.frombuffer(s["bin"], np.uint8),)
    if "jpg" in s:
        with Image.open(io.BytesIO(s["jpg"])) as img:
            return np.asarray(img.convert("RGB")), int(s["cls"])
    # FFCV's BytesDecoder hands out a (batch, longest) matrix without the lengths, and the bytes past a shorter
    # sample are left over from earlier ones: the text is stored zero-padded to 256 bytes (all are <= 250)
    return np.frombuffer(s["txt"].ljust(256, b"\0") if pad else s["txt"], np.uint8), int(s["cls"])


def ffcv_fields(first: dict) -> dict:
    """txt: ``BytesField`` (UTF-8; zero-padded to 256 bytes for reading), cls: ``IntField``, bin: ``BytesField``,
    jpg: ``RGBImageField(write_mode="jpg", jpeg_quality=90)``, which takes pixels only, so FFCV re-encodes each
    JPEG (at the source's quality 90)."""
    from ffcv.fields import BytesField, IntField, RGBImageField

    if "bin" in first:
        return {"bin": BytesField()}
    if "jpg" in first:
        return {"jpg": RGBImageField(write_mode="jpg", jpeg_quality=90), "cls": IntField()}
    return {"txt": BytesField(), "cls": IntField()}


class FFCVSamples:
    """Samples held in memory as FFCV's writer wants them: a map-style dataset of tuples in field order."""

    def __init__(self, samples: list[dict], pad: bool = True):
        self.samples, self.pad = samples, pad

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        return _as_arrays(self.samples[i], self.pad)


def ffcv_file(paths: list[str]) -> str:
    """The shards converted once to FFCV's ``.beton`` with ``DatasetWriter`` (fields: ``ffcv_fields``)."""
    from ffcv.writer import DatasetWriter

    out = DATA / "peers" / "ffcv" / (pathlib.Path(paths[0]).parent.name + "-v2.beton")  # v2: text zero-padded
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        samples = in_memory(paths)
        tmp = out.with_suffix(".tmp")
        DatasetWriter(str(tmp), ffcv_fields(samples[0]), num_workers=2).from_indexed_dataset(FFCVSamples(samples))
        tmp.rename(out)
    return str(out)


# -- MosaicML Streaming ----------------------------------------------------------------------------------------------


def streaming_dir(paths: list[str]) -> str:
    """The shards converted once with Streaming's ``MDSWriter`` (txt: ``str``, cls: ``int``; 64 MB shards)."""
    from bench_convert import _stub_torchvision  # no torchvision matches torch 2.13 in its venv; none is used

    _stub_torchvision()
    from streaming import MDSWriter

    out = DATA / "peers" / "streaming" / pathlib.Path(paths[0]).parent.name
    if not _done(out):
        import shutil

        shutil.rmtree(out, ignore_errors=True)
        first = _typed(in_memory(paths[:1])[0])
        columns = {k: {str: "str", int: "int", bytes: "bytes"}[type(v)] for k, v in first.items()}
        with MDSWriter(out=str(out), columns=columns, size_limit=64 << 20) as sink:
            for s in in_memory(paths):
                sink.write(_typed(s))
        (out / "DONE").write_text("ok")
    return str(out)
