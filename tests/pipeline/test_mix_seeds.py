"""The exact mix's orders are pinned: saved states and epoch orders must not change when code moves.

The values were taken from the code before the seed derivation of :class:`~shardstream.pipeline.schedule.Schedule`
and :mod:`shardstream.indexed.mixsampler` went to :func:`shardstream.runtime.derive_key` (issue 27): the derived
keys must stay bit-identical. The last test keeps the derivation in its one home.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import shardstream
from shardstream.indexed.mixsampler import ExactMixSampler, MixOrder
from shardstream.pipeline.schedule import Schedule

#: (seed, epoch) -> Schedule([5, 3, 2]).sequence(), its walk of part 1 of 2, MixOrder([4, 3, 5], [6, 2, 5]).all()
PINNED = {
    (0, 0): ([1, 0, 0, 2, 1, 0, 0, 1, 0, 2], [1, 0, 2, 1, 0], [5, 2, 10, 0, 8, 9, 3, 1, 4, 11, 3, 7, 0]),
    (7, 3): ([2, 0, 1, 0, 1, 0, 0, 0, 2, 1], [2, 0, 1, 1, 0], [7, 2, 3, 5, 11, 0, 10, 1, 6, 0, 8, 9, 3]),
    ("abc", 1): ([1, 2, 0, 0, 1, 0, 0, 1, 2, 0], [0, 1, 2, 0, 1], [4, 11, 0, 1, 9, 10, 3, 2, 8, 2, 6, 7, 3]),
}

#: seed -> ExactMixSampler([4, 3, 5], [6, 2, 5], num_replicas=2) positions of ranks 0 and 1 (epoch 0)
SAMPLER = {
    0: [[5, 2, 10, 3, 3, 9], [4, 8, 0, 1, 0, 11]],
    7: [[6, 0, 10, 2, 9, 0], [11, 5, 1, 3, 7, 1]],
}


@pytest.mark.parametrize(("seed", "epoch"), sorted(PINNED, key=repr))
def test_the_schedule_and_the_mix_order_are_pinned(seed, epoch):
    sequence, walk, ids = PINNED[seed, epoch]
    schedule = Schedule([5, 3, 2], seed, epoch)
    assert schedule.sequence().tolist() == sequence
    assert list(schedule.walk(1, 2)) == walk
    assert MixOrder([4, 3, 5], [6, 2, 5], seed=seed, epoch=epoch).all().tolist() == ids


@pytest.mark.parametrize("seed", sorted(SAMPLER))
def test_the_mix_sampler_order_is_pinned(seed):
    got = [list(ExactMixSampler([4, 3, 5], [6, 2, 5], num_replicas=2, rank=r, seed=seed)) for r in range(2)]
    assert got == SAMPLER[seed]


#: modules that may hash with BLAKE2b, and what for (a new one is a new rule: derive keys with runtime.derive_key)
BLAKE2B_USERS = {
    "runtime.py": "derive_key, the one seed rule",
    "resume/__init__.py": "digest(), a state fingerprint's short digest",
    "training/sources.py": "a cache file name from a shard path",
    "indexed/shardindex.py": "a shard index's content digest",
}


def test_random_keys_are_derived_in_one_place():
    src = pathlib.Path(shardstream.__file__).parent
    users = set()
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "blake2b":
                users.add(path.relative_to(src).as_posix())
    assert users == set(BLAKE2B_USERS), "derive random keys with shardstream.runtime.derive_key"
