"""Helpers of the training tests: small datasets written with shardstream's ShardWriter (plain tar, no sidecars).

Sample ``n`` (0-based over the whole dataset) has the key ``s{n:05d}`` and ``cls`` = ``n``, so a key tells the
sample's original position.
"""

from __future__ import annotations

from shardstream.writer import ShardWriter


def write_dataset(folder, sizes, prefix="train"):
    """Shards of ``sizes`` samples each in ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths, n = [], 0
    for number, size in enumerate(sizes):
        path = str(folder / f"{prefix}-{number:04d}.tar")
        with ShardWriter(path.replace(f"{number:04d}", "%04d"), maxcount=max(size, 1), start_shard=number) as sink:
            for _ in range(size):
                sink.write({"__key__": f"s{n:05d}", "cls": n, "txt": f"sample {n}"})
                n += 1
        paths.append(path)
    return paths


def keys_of(batches):
    """The sample numbers in a list of collated batches (dicts with ``__key__``) or of sample lists."""
    out = []
    for batch in batches:
        rows = batch if isinstance(batch, list) else [{"__key__": k} for k in batch["__key__"]]
        out.extend(int(sample["__key__"][1:]) for sample in rows)
    return out
