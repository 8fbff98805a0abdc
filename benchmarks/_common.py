"""Shared pieces of the benchmarks: generated datasets, timing, and the ratio table.

Benchmarks measure ratios inside one run (side by side), never absolute times: these machines are noisy.
Data goes to ``bench-data/`` at the repository root (git-ignored) and is reused between runs.
"""

from __future__ import annotations

import importlib.util
import io
import os
import pathlib
import random
import subprocess
import sys
import time
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "bench-data"
sys.path.insert(0, str(ROOT / "src"))


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def small_shards(n_samples: int = 200_000, per_shard: int = 10_000) -> list[str]:
    """``n_samples`` samples of a ~250 B ``.txt`` and a ``.cls``, in shards of ``per_shard`` (written once)."""
    from shardstream.writer import ShardWriter

    folder = DATA / f"small-{n_samples}"
    done = folder / "DONE"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(0)
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
        with ShardWriter(str(folder / "small-%06d.tar"), maxcount=per_shard) as sink:
            for i in range(n_samples):
                text = " ".join(rng.choice(words) for _ in range(42))[:250]
                sink.write({"__key__": f"s{i:08d}", "txt": text, "cls": str(i % 1000)})
        done.write_text("ok")
    return sorted(str(p) for p in folder.glob("small-*.tar"))


def big_shards(n_samples: int = 128, size: int = 4 << 20, per_shard: int = 32) -> list[str]:
    """``n_samples`` samples of one ``size``-byte ``.bin`` field (random bytes), ``per_shard`` per shard."""
    from shardstream.writer import ShardWriter

    folder = DATA / f"big-{n_samples}x{size}"
    done = folder / "DONE"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        blob = os.urandom(size)
        with ShardWriter(str(folder / "big-%06d.tar"), maxcount=per_shard, maxsize=1 << 40) as sink:
            for i in range(n_samples):
                sink.write({"__key__": f"b{i:06d}", "bin": blob[i:] + blob[:i]})
        done.write_text("ok")
    return sorted(str(p) for p in folder.glob("big-*.tar"))


def warm(paths: list[str]) -> int:
    """Read the files once so the page cache is warm; return their total size."""
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            while chunk := f.read(1 << 24):
                total += len(chunk)
    return total


def timed(fn: Callable[[], int], repeat: int = 1) -> tuple[float, int]:
    """Run ``fn`` (returns a count) ``repeat`` times; return (best seconds, count)."""
    best, count = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        count = fn()
        best = min(best, time.perf_counter() - start)
    return best, count


def cat_seconds(paths: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(["cat", *paths], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def table(title: str, rows: list[tuple[str, float, str]], baseline: str) -> str:
    """Rows of (name, rate, unit); ratios against the row named ``baseline``."""
    base = dict((n, r) for n, r, _ in rows).get(baseline)
    width = max(len(n) for n, _, _ in rows)
    lines = [f"## {title}", f"{'':{width}}  {'rate':>14}  {'ratio vs ' + baseline:>14}"]
    for name, rate, unit in rows:
        ratio = f"{rate / base:.2f}x" if base else "-"
        lines.append(f"{name:{width}}  {rate:>10,.0f} {unit:<3}  {ratio:>14}")
    return "\n".join(lines)


def jpeg_shards(n_samples: int = 2000, per_shard: int = 500, size: tuple[int, int] = (500, 375)) -> list[str]:
    """``n_samples`` photo-like JPEGs (``size``, quality 90, ~ImageNet's average) with a ``.cls``, written once."""
    import numpy as np
    from PIL import Image

    from shardstream.writer import ShardWriter

    folder = DATA / f"jpeg-{n_samples}-{size[0]}x{size[1]}"
    done = folder / "DONE"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        w, h = size
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        rng = np.random.default_rng(0)
        with ShardWriter(str(folder / "jpeg-%06d.tar"), maxcount=per_shard) as sink:
            for i in range(n_samples):
                a, b, c = rng.uniform(10, 80, 3)
                rgb = np.stack([128 + 100 * np.sin(x / a + i), 128 + 100 * np.cos(y / b), 255 * (x + y) / (w + h)], -1)
                rgb += rng.normal(0, 12, rgb.shape)  # texture, so the JPEG is photo-sized
                buf = io.BytesIO()
                Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
                sink.write({"__key__": f"j{i:06d}", "jpg": buf.getvalue(), "cls": str(i % 1000)})
        done.write_text("ok")
    return sorted(str(p) for p in folder.glob("jpeg-*.tar"))
