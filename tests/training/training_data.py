"""Helpers of the training tests: small datasets written by shardstream.testing.write_shards (plain tar, no sidecars).

Sample ``n`` (0-based over the whole dataset) has the key ``s{n:05d}`` and ``cls`` = ``n``, so a key tells the
sample's original position.
"""

from __future__ import annotations

from shardstream.testing import write_shards


def write_dataset(folder, sizes, prefix="train"):
    """Shards of ``sizes`` samples each in ``folder``; returns their paths."""
    fields = {"cls": lambda shard, index, n: n, "txt": lambda shard, index, n: f"sample {n}"}
    return write_shards(folder, sizes, fields, name=prefix + "-{shard:04d}.tar", key="s{number:05d}")


def keys_of(batches):
    """The sample numbers in a list of collated batches (dicts with ``__key__``) or of sample lists."""
    out = []
    for batch in batches:
        rows = batch if isinstance(batch, list) else [{"__key__": k} for k in batch["__key__"]]
        out.extend(int(sample["__key__"][1:]) for sample in rows)
    return out
