"""Helpers of the processing tests: small input shards, and a byte-for-byte view of an output folder."""

from __future__ import annotations

import os
import pathlib

from shardstream.testing import write_shards

HERE = pathlib.Path(__file__).parent


def make_shards(root: pathlib.Path, shards: int = 4, per_shard: int = 25) -> list[str]:
    """``shards`` shards of ``per_shard`` samples (keys s00000..., fields txt and cls) in ``root``."""
    fields = {"txt": lambda shard, index, i: f"sample {i} " + "x" * (i % 50), "cls": lambda shard, index, i: i % 5}
    return write_shards(root, [per_shard] * shards, fields, name="in-{shard:06d}.tar", key="s{number:05d}")


def tree_bytes(root: str) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), the task manifests excepted (they hold timings)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if not rel.startswith("_tasks"):
                with open(path, "rb") as f:
                    out[rel] = f.read()
    return out
