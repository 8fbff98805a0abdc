"""bench_peers.py's ``write`` workload (issue 7; not part of the default run): seconds for each library to write
the four generated datasets (200k x ~250 B txt+cls, 2,000 JPEGs, 128 x 4 MiB, 40k x 8 KiB) in its own format, held
in memory as ``bytes`` (loading untimed), and the output size against the minimal tar size.
"""

from __future__ import annotations

import os
import pathlib
import time
import warnings

from peers_data import DATA, FFCVSamples, big_shards, ffcv_fields, in_memory, jpeg_shards, small_shards


def write_sets(quick: bool) -> list[tuple[str, list[str], int]]:
    """(name, source shards, samples per shard) of the four datasets the harness generates."""
    n_med = 4000 if quick else 40_000
    return [("small", small_shards(20_000 if quick else 200_000), 10_000),
            ("jpeg", jpeg_shards(200 if quick else 2000), 500),
            ("big", big_shards(32 if quick else 128), 32),
            ("medium", big_shards(n_med, 8192, 10_000), 10_000)]


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


def write_ffcv(folder: str, samples: list[dict], per_shard: int) -> None:
    """One ``.beton`` per dataset, fields as in ``ffcv_file`` (text not padded; jpg re-encoded), 2 workers."""
    from ffcv.writer import DatasetWriter

    DatasetWriter(os.path.join(folder, "data.beton"), ffcv_fields(samples[0]), num_workers=2).from_indexed_dataset(
        FFCVSamples(samples, pad=False))


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
        samples = in_memory(paths)
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


