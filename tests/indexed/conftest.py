"""Small shards for the random-access tests (shardstream.testing.write_shards), and a streaming reference."""

from __future__ import annotations

import pytest

from shardstream.samples import group_samples
from shardstream.tar import iter_tar
from shardstream.testing import write_shards as _write_shards


def _sample(i: int) -> dict:
    """Sample ``i``: a few fields of different sizes (some over one tar block)."""
    data = bytes([i % 251]) * (i * 37 % 1500)
    return {"__key__": f"k{i:04d}", "txt": f"text {i} " * (i % 7), "cls": i % 10, "bin": data}


def _streamed(paths: list[str], rule=None) -> list[dict]:
    """Every sample of ``paths`` as streaming reads them (the reference for random access)."""
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.extend(group_samples(iter_tar(f, path), path, rule=rule))
    return out


@pytest.fixture
def make_sample():
    """``make_sample(i)``: the ``i``-th sample the shards hold."""
    return _sample


@pytest.fixture
def streamed():
    """``streamed(paths, rule=None)``: every sample of ``paths`` as streaming reads them."""
    return _streamed


@pytest.fixture
def write_shards(tmp_path):
    """``write_shards(n, per_shard, name="ds") -> [paths]``: ``n`` samples ``sample(i)`` in shards of ``per_shard``
    (the last one shorter) named ``{name}-000.tar``..., by :func:`shardstream.testing.write_shards`."""

    def write(n: int = 23, per_shard: int = 5, name: str = "ds") -> list[str]:
        sizes = [min(per_shard, n - start) for start in range(0, n, per_shard)]
        return _write_shards(tmp_path, sizes, lambda shard, index, i: _sample(i), name=name + "-{shard:03d}.tar")

    return write
