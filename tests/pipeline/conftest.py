"""Small tar shards for the pipeline tests, written with the stdlib ``tarfile`` (independent of our writer).

Not shardstream.testing.write_shards on purpose: the readers are tested on archives another writer made, and
test_tariterators cuts these shards at byte offsets that depend on tarfile's headers and member order (txt, cls).
"""

from __future__ import annotations

import pytest
from pipeline_data import write_tar


def sample_members(shard: int, count: int):
    for i in range(count):
        key = f"s{shard}-{i:03d}"
        yield f"{key}.txt", f"text {shard} {i}".encode()
        yield f"{key}.cls", str((shard * count + i) % 10).encode()


@pytest.fixture
def make_shards(tmp_path):
    """``make_shards(nshards, per_shard) -> [path, ...]``; sample keys are ``s{shard}-{i:03d}``."""

    def make(nshards: int = 4, per_shard: int = 5, prefix: str = "shard"):
        return [
            write_tar(tmp_path / f"{prefix}-{n:06d}.tar", list(sample_members(n, per_shard))) for n in range(nshards)
        ]

    return make
