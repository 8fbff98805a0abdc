"""Throughput of the tar member walk: Python's ``tarfile`` (what webdataset uses) vs shardstream's two walks.

Builds one shard of small samples (default 200k samples of ~250 B: ``.txt`` + ``.cls``, two members each) in
``bench-data/`` (reused on later runs), warms the page cache, then times one full pass of each reader and
prints a table. One run each: numbers are indicative, not statistics.

    .venv/bin/python benchmarks/bench_tar_scan.py [--samples 200000] [--dir bench-data]

Member rows, compared with the first: ``tarfile`` in stream mode with ``extractfile().read()`` per regular
member (webdataset's ``tar_file_iterator``), then shardstream's pure-Python and C walks (``iter_members``).
Sample rows, compared with the first: webdataset itself (``tar_file_expander`` + ``group_by_keys``) when it
is installed (``make bench`` installs it into ``.venv-bench``), then shardstream's default walk followed by
``group_samples`` (what a dataset does).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import tarfile
import time
from collections.abc import Callable, Iterator

from shardstream.samples import group_samples
from shardstream.tar import accelerated, iter_members
from shardstream.tar.writer import TarStreamWriter

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORDS = "the quick brown fox jumps over a lazy dog while seven tired zebras quietly sing".split()


def make_shard(path: pathlib.Path, samples: int) -> None:
    """Write ``samples`` samples of ~250 B (a ~240 B ``.txt`` and a short ``.cls``) unless the file exists."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f, TarStreamWriter(f) as tw:
        for i in range(samples):
            text = " ".join(rng.choice(WORDS) for _ in range(48)).encode()[:240]
            tw.add(f"sample{i:07d}.txt", text)
            tw.add(f"sample{i:07d}.cls", b"%d" % rng.randrange(1000))
    os.replace(tmp, path)


def tarfile_members(path: pathlib.Path) -> Iterator[tuple[str, bytes]]:
    """Regular members as webdataset reads them: ``tarfile`` stream mode, ``extractfile(info).read()``."""
    with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r|*") as tf:
        for info in tf:
            if info.isreg():
                yield info.name, tf.extractfile(info).read()  # type: ignore[union-attr]


def shardstream_members(path: pathlib.Path, accelerate: bool) -> Iterator[tuple[str, bytes, int]]:
    with open(path, "rb") as f:
        yield from iter_members(f, str(path), accelerate=accelerate)


def shardstream_samples(path: pathlib.Path) -> Iterator[dict]:
    with open(path, "rb") as f:
        yield from group_samples(iter_members(f, str(path)), str(path))


def webdataset_samples(path: pathlib.Path) -> Iterator[dict]:
    from webdataset.tariterators import group_by_keys, tar_file_expander

    with open(path, "rb") as f:
        yield from group_by_keys(tar_file_expander([{"url": str(path), "stream": f}]))


def count_per_second(items: Callable[[], Iterator[object]]) -> tuple[int, float]:
    start = time.perf_counter()
    count = sum(1 for _ in items())
    return count, count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--dir", type=pathlib.Path, default=ROOT / "bench-data")
    args = parser.parse_args()

    path = args.dir / f"tar-scan-{args.samples}.tar"
    make_shard(path, args.samples)
    with open(path, "rb") as f:  # warm the page cache
        while f.read(1 << 24):
            pass

    rows: list[tuple[str, str, Callable[[], Iterator[object]]]] = [
        ("tarfile stream (webdataset's reader)", "members", lambda: tarfile_members(path)),
        ("shardstream pure Python", "members", lambda: shardstream_members(path, False)),
    ]
    if accelerated():
        rows.append(("shardstream C", "members", lambda: shardstream_members(path, True)))
    try:
        import webdataset  # noqa: F401
    except ImportError:
        notes = ["webdataset is not installed (make bench installs it): samples rows compare with tarfile's rate / 2"]
    else:
        notes = []
        rows.append(("webdataset tar_file_expander + group_by_keys", "samples", lambda: webdataset_samples(path)))
    rows.append(("shardstream + group_samples", "samples", lambda: shardstream_samples(path)))
    if not accelerated():
        notes.append("the C extension is not built (.venv/bin/python setup.py build_ext --inplace): no C row")

    print(f"shard: {path} ({path.stat().st_size / 1e6:.0f} MB, {args.samples} samples, {2 * args.samples} members)")
    print(f"{'reader':<46} {'unit':>8} {'count':>8} {'per second':>12} {'ratio':>7}")
    first: dict[str, float] = {}  # the first row of each unit is its baseline
    for label, unit, items in rows:
        count, rate = count_per_second(items)
        if unit == "samples" and "samples" not in first:
            first["samples"] = rate if "webdataset" in label else first["members"] / 2
        baseline = first.setdefault(unit, rate)
        print(f"{label:<46} {unit:>8} {count:>8} {rate:>12,.0f} {rate / baseline:>6.1f}x")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
