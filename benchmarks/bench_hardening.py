"""Issue 18's measurements: peak memory on decompression bombs, and descriptors with thousands of shards.

Each measurement runs in a fresh process, with the package from ``--src`` (default: this checkout's ``src``),
so the same table can show a checkout before the hardening next to this one:

    .venv/bin/python benchmarks/bench_hardening.py                          # this checkout
    .venv/bin/python benchmarks/bench_hardening.py --before ../main/src     # before / after, side by side

Bombs (``fuzz/bombs.py``): each field is decoded by ``Decoder("rgb8")`` as part of a sample; the table gives
the outcome and the growth of the process's peak RSS (``VmHWM``) over the decode, in MB. Processes run
under a 6 GiB address-space limit, so a bomb that would take more ends in ``MemoryError`` instead of taking
the machine. Descriptors: ``--shards`` copies of a small indexed shard read by ``IndexedDataset`` (every
sample, then every 7th backwards) under the default soft limit of 1024 open files; the table gives the
outcome and the most descriptors open at once.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
BOMBS = {
    "json.gz: 4 MB -> 4 GB": "gzip_bomb(4 << 30)",
    "npz: 2.3 MB -> 2.3 GB": "npz_bomb()",
    "npy declaring 8 TiB": "npy_shape_bomb()",
    "png: 1.1 MB, 12000x12000 RGBA16": "png_bomb()",
    "webp: 34 B, 12900x12900": "webp_bomb()",
    "webp: 34 B, 16383x16383": "webp_bomb(16_383, 16_383)",
    "jpeg: 631 B, 12000x12000": "jpeg_bomb()",
}


def _child(src: str, code: str, timeout: int = 600) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    env.pop("SHARDSTREAM_MAX_DECODED_BYTES", None)
    env.pop("SHARDSTREAM_MAX_IMAGE_PIXELS", None)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env=env, timeout=timeout)  # fmt: skip
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"outcome": f"died ({result.returncode}): {result.stderr.strip().splitlines()[-1:]}", "mb": None}
    return json.loads(lines[-1])


def bomb(src: str, call: str) -> dict:
    return _child(src, f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, resource.RLIM_INFINITY))
        sys.path.insert(0, {str(ROOT / "fuzz")!r})
        import bombs
        from shardstream.codecs import Decoder
        field, data = bombs.{call}
        decoder = Decoder("rgb8")
        before = bombs.peak_rss_kb()
        try:
            decoder({{"__key__": "k", "__url__": "shard.tar", field: data}})
            outcome = "decoded"
        except BaseException as e:
            cause = e.__cause__
            outcome = type(e).__name__ + (f" (from {{type(cause).__name__}})" if cause is not None else "")
        mb = (bombs.peak_rss_kb() - before) / 1024
        print(json.dumps({{"outcome": outcome, "mb": mb}}))
    """)


def descriptors(src: str, index: str) -> dict:
    return _child(src, f"""
        import json, os, resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        from shardstream.indexed import IndexedDataset
        most = 0
        try:
            ds = IndexedDataset({index!r})
            for i in list(range(len(ds))) + list(range(len(ds) - 1, -1, -7)):
                ds[i]
                if i % 50 == 0:
                    most = max(most, len(os.listdir("/proc/self/fd")))
            outcome = f"read {{len(ds)}} samples"
        except BaseException as e:
            outcome = f"{{type(e).__name__}}: {{str(e)[:60]}}"
        print(json.dumps({{"outcome": outcome, "mb": most}}))
    """)


def make_shards(folder: str, count: int, src: str) -> str:
    code = f"""
        import shutil
        from shardstream.indexed import DatasetIndex, ShardEntry, ShardIndex, indexed_shard_writer
        with indexed_shard_writer({folder!r} + "/s-%06d.tar", maxcount=2) as sink:
            for i in range(2):
                sink.write({{"__key__": f"k{{i}}", "cls": i}})
        first, index = sink.shards[0], ShardIndex.load(sink.shards[0])
        entries = []
        for n in range({count}):
            shard = f"{folder}/s-{{n:06d}}.tar"
            if n:
                shutil.copyfile(first, shard)
                shutil.copyfile(first + ".ssidx", shard + ".ssidx")
            entries.append(ShardEntry(shard, shard + ".ssidx", 2, index.size, index.fingerprint))
        DatasetIndex(tuple(entries)).save({folder!r} + "/ds.json")
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, env={**os.environ, "PYTHONPATH": src})
    return f"{folder}/ds.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=str(ROOT / "src"), help="the package to measure (after)")
    parser.add_argument("--before", default=None, help="another checkout's src to measure side by side")
    parser.add_argument("--shards", type=int, default=5000, help="shards for the descriptor measurement")
    parser.add_argument("--skip-bombs", action="store_true")
    args = parser.parse_args()
    columns = ([("before", args.before)] if args.before else []) + [("after", args.src)]
    header = f"{'measurement':<34}" + "".join(f" {name + ' outcome':<40} {name + ' MB':>9}" for name, _ in columns)
    print(header)
    print("-" * len(header))

    def row(label: str, results: list[dict], unit: str = "MB") -> None:
        cells = "".join(f" {r['outcome'][:40]:<40} {'-' if r['mb'] is None else format(r['mb'], '9.0f'):>9}"
                        for r in results)  # fmt: skip
        print(f"{label:<34}{cells}", flush=True)

    if not args.skip_bombs:
        for label, call in BOMBS.items():
            row(label, [bomb(src, call) for _, src in columns])
    folder = tempfile.mkdtemp(prefix="bench-hardening-")
    try:
        index = make_shards(folder, args.shards, args.src)
        row(f"{args.shards} shards, NOFILE 1024 (fds)", [descriptors(src, index) for _, src in columns])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
