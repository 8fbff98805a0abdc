"""Helpers of the CLI tests: small inputs built with shardstream.testing.write_shards and Pillow, and ways to run
the command.

The file names here are the ones the ``--help`` examples use (test_cli_help.py runs them).
"""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import subprocess
import sys
import tarfile

import numpy as np
import PIL.Image

from shardstream.cli import main
from shardstream.testing import write_shards

BIN = pathlib.Path(sys.executable).parent


def png(value: int, size: int = 8) -> bytes:
    out = io.BytesIO()
    PIL.Image.fromarray(np.full((size, size, 3), value % 256, np.uint8)).save(out, format="PNG")
    return out.getvalue()


def make_sample(prefix: str, i: int) -> dict:
    return {
        "__key__": f"{prefix}{i:06d}",
        "txt": f"sample {prefix}{i}",
        "cls": str(i % 3),
        "png": png(i),
        "json": json.dumps({"i": i}),
    }


def write_tar(path: pathlib.Path | str, samples: list[dict]) -> None:
    """One tar of ``samples`` (already encoded: bytes and str only) at ``path``."""
    path = pathlib.Path(path)
    write_shards(path.parent, [len(samples)], lambda shard, index, n: samples[n], name=path.name, encoder=False)


def build_inputs(root: pathlib.Path) -> None:
    """images/ (an ImageFolder), recipe.txt, samples.jsonl, dataset.tar, a.tar, b.tar, shards-00000{0..3}.tar,
    and a shard cache with two entries in shard-cache/."""
    for label, (cls, count) in enumerate((("cat", 3), ("dog", 2))):
        for i in range(count):
            d = root / "images" / cls
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{cls}{i:04d}.png").write_bytes(png(40 * label + i))
    (root / "images" / "cat" / "cat0000.json").write_text('{"note": "sidecar"}')
    (root / "note.txt").write_text("recipe source file")
    (root / "recipe.txt").write_text(
        "# a recipe: archive-name source\n"
        "r0.txt text:hello world\nr0.cls text:1\n"
        "r1.txt note.txt\nr1.cls text:2\n"
    )
    with open(root / "samples.jsonl", "w") as f:
        for i in range(3):
            f.write(json.dumps({"__key__": f"j{i}", "txt": f"caption {i}", "json": {"i": i},
                                "png.b64": base64.b64encode(png(i)).decode()}) + "\n")
    for prefix, sizes, name in (("d", [20], "dataset.tar"), ("a", [6], "a.tar"), ("b", [6], "b.tar"),
                                ("s", [5] * 4, "shards-{shard:06d}.tar")):
        write_shards(root, sizes, lambda shard, index, n, prefix=prefix: make_sample(prefix, n), name=name,
                     encoder=False)
    cache = root / "shard-cache"
    cache.mkdir()
    (cache / "http_host_a.0123456789abcdef.tar").write_bytes(b"x" * 3000)
    (cache / "http_host_b.fedcba9876543210.tar").write_bytes(b"y" * 2000)
    os.utime(cache / "http_host_a.0123456789abcdef.tar", (1_000_000, 1_000_000))


def run_cli(*args: str) -> int:
    """``main([...])`` in-process."""
    return main([str(a) for a in args])


def shell(cmd: str, cwd: pathlib.Path, **kw) -> subprocess.CompletedProcess:
    """Run a shell command with the venv's bin first on PATH."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(cmd, shell=True, cwd=cwd, env=env, capture_output=True, timeout=120, **kw)


def members(path: pathlib.Path | str) -> list[tuple[str, bytes]]:
    with tarfile.open(path) as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf if m.isfile()]


def keys(path: pathlib.Path | str) -> list[str]:
    seen: list[str] = []
    for name, _ in members(path):
        key = name.split("/")[-1].split(".")[0]
        key = "/".join(name.split("/")[:-1] + [key])
        if not seen or seen[-1] != key:
            seen.append(key)
    return seen
