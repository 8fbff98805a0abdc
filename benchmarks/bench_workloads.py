"""The issue-7 workloads, shardstream's fast paths next to webdataset 1.0.2 (same data, same process, one table each).

    .venv-bench/bin/python benchmarks/bench_workloads.py [--quick]

1. raw iteration of 200k samples of ~250 B (.txt + .cls) as per-sample dicts;
2. decode txt + cls in batches of 256;
3. JPEG -> 224x224 RGB (decode, centre crop, resize) in batches of 64, one thread and two (``parallel_map``),
   exact and with ``draft=True``.
Rates are samples/s; ratios are against webdataset. Each row is the best of ``--repeat`` runs (default 2).
"""

from __future__ import annotations

import argparse
import io
import warnings

from _common import have, jpeg_shards, small_shards, table, timed, warm

import shardstream as wds
from shardstream.codecs import Decoder, decode_resized
from shardstream.pipeline import parallel_map, tarfile_to_columns
from shardstream.samples import iter_samples
from shardstream.tar import accelerated

WD = "webdataset 1.0.2"


def _wds():
    import webdataset

    warnings.simplefilter("ignore")
    return webdataset


def count_batches(batches) -> int:
    n = 0
    for batch in batches:
        first = batch[0] if isinstance(batch, (list, tuple)) else next(iter(batch.values()))
        n += len(first)
    return n


def raw(paths: list[str], repeat: int) -> None:
    rows = []
    if have("webdataset"):
        t, n = timed(lambda: sum(1 for _ in _wds().WebDataset(paths, shardshuffle=False)))
        rows.append((f"{WD} WebDataset", n / t, "s"))
    t, n = timed(lambda: sum(1 for _ in wds.WebDataset(paths, shardshuffle=False)), repeat)
    rows.append(("shardstream WebDataset (as wired today)", n / t, "s"))

    def c_pass() -> int:
        n = 0
        for p in paths:
            with open(p, "rb") as f:
                for _ in iter_samples(f, p):
                    n += 1
        return n

    t, n = timed(c_pass, repeat)
    rows.append(("shardstream iter_samples (C walk+group)", n / t, "s"))
    print(table("raw iteration, 200k x ~250 B .txt+.cls, per-sample dicts (samples/s)", rows, rows[0][0]))


def decode_batches(paths: list[str], repeat: int) -> None:
    rows = []
    if have("webdataset"):
        w = _wds()
        t, n = timed(lambda: count_batches(w.WebDataset(paths, shardshuffle=False).decode()
                                           .to_tuple("txt", "cls").batched(256)))
        rows.append((f"{WD} decode+to_tuple+batched", n / t, "s"))
    t, n = timed(lambda: count_batches(wds.WebDataset(paths, shardshuffle=False).decode()
                                       .to_tuple("txt", "cls").batched(256)), repeat)
    rows.append(("shardstream decode+to_tuple+batched", n / t, "s"))
    t, n = timed(lambda: count_batches(wds.WebDataset(paths, shardshuffle=False).to_tuple("txt", "cls")
                                       .map_tuple(bytes.decode, int).batched(256)), repeat)
    rows.append(("shardstream to_tuple+map_tuple+batched", n / t, "s"))
    decoder = Decoder()
    t, n = timed(lambda: count_batches(wds.DataPipeline(wds.SimpleShardList(paths), tarfile_to_columns(256),
                                                        wds.map(decoder.decode_columns))), repeat)
    rows.append(("shardstream tarfile_to_columns+decode_columns", n / t, "s"))
    print(table("decode txt + cls, batches of 256 (samples/s)", rows, rows[0][0]))


def crop_resize_pil(image, size: int = 224):
    """webdataset's side of the JPEG workload: the same centre crop and bilinear resize, on a decoded PIL image."""
    import numpy as np
    from PIL import Image

    w, h = image.size
    side = min(w, h)
    box = ((w - side) / 2, (h - side) / 2, (w + side) / 2, (h + side) / 2)
    return np.asarray(image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR, box=box))


def jpeg(paths: list[str], repeat: int) -> None:
    rows = []
    if have("webdataset"):
        w = _wds()
        t, n = timed(lambda: count_batches(w.WebDataset(paths, shardshuffle=False).decode("pil")
                                           .map_dict(jpg=crop_resize_pil).to_tuple("jpg", "cls").batched(64)))
        rows.append((f"{WD} decode('pil')+crop+resize", n / t, "s"))

    def ours(threads: int, draft: bool) -> int:
        def load(sample):
            return decode_resized(sample["jpg"], 224, draft=draft), int(sample["cls"])

        ds = wds.WebDataset(paths, shardshuffle=False)
        ds = ds.map(load) if threads == 1 else ds.compose(parallel_map(load, workers=threads))
        return count_batches(ds.batched(64))

    for threads in (1, 2):
        for draft in (False, True):
            t, n = timed(lambda: ours(threads, draft), repeat)
            name = f"shardstream decode_resized, {threads} thread{'s' if threads > 1 else ''}"
            rows.append((name + (", draft" if draft else ", exact"), n / t, "s"))
    print(table("JPEG -> 224x224 RGB, batches of 64 (samples/s)", rows, rows[0][0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data (for a smoke run)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"C accelerator in use: {accelerated()}\n")
    small = small_shards(20_000 if args.quick else 200_000)
    warm(small)
    raw(small, args.repeat)
    print()
    decode_batches(small, args.repeat)
    print()
    images = jpeg_shards(200 if args.quick else 2000)
    warm(images)
    jpeg(images, args.repeat)


if __name__ == "__main__":
    main()
