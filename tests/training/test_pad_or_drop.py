"""Pad or drop, the rule that makes positions divisible by ranks: the distributed sampler and the epoch plan.

The pinned values were taken from the code before both callers shared one rule (issue 27); the last test makes the
two callers agree on every small case, so the rule cannot drift between them.
"""

from __future__ import annotations

import collections

import pytest

from shardstream.indexed.sampler import DistributedLocalitySampler
from shardstream.training.plan import EpochPlan

#: (shard lengths, ranks, drop_last) -> every rank's positions of epoch 1 (window=2, seed=1)
SAMPLER = {
    ((5, 5), 3, False): [[2, 5, 3, 9], [4, 0, 8, 7], [6, 1, 2, 5]],
    ((5, 5), 3, True): [[2, 5, 3], [9, 4, 0], [8, 7, 6]],
    ((4, 3, 2), 4, False): [[8, 2, 1], [7, 3, 0], [4, 6, 5], [8, 2, 1]],
    ((4, 3, 2), 4, True): [[8, 2], [1, 7], [3, 0], [4, 6]],
    ((1,), 2, False): [[0], [0]],
}

#: (total, ranks, batch_size, drop_last, contiguous, workers) -> (length, every rank's positions, the positions of
#: every rank of the plan resumed after one batch on one rank more)
PLAN = {
    (7, 2, 2, False, False, 1): (8, [[0, 2, 4, 6], [1, 3, 5, 0]], [[4], [5], [6]]),
    (7, 2, 2, True, False, 1): (4, [[0, 2], [1, 3]], [[], [], []]),
    (11, 3, 2, False, True, 2): (12, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 0]], [[2, 3], [6, 7], [10, 2], [3, 6]]),
    (11, 3, 2, True, True, 2): (6, [[0, 1], [2, 3], [4, 5]], [[], [], [], []]),
    (10, 4, 3, False, False, 1): (12, [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]], [[], [], [], [], []]),
}


@pytest.mark.parametrize("case", list(SAMPLER), ids=repr)
def test_the_distributed_sampler_is_pinned(case):
    lengths, ranks, drop_last = case
    got = [DistributedLocalitySampler(list(lengths), ranks, r, window=2, seed=1, drop_last=drop_last).order(1).tolist()
           for r in range(ranks)]
    assert got == SAMPLER[case]
    assert [len(DistributedLocalitySampler(list(lengths), ranks, r, drop_last=drop_last)) for r in range(ranks)] == \
        [len(share) for share in got]


@pytest.mark.parametrize("case", list(PLAN), ids=repr)
def test_the_epoch_plan_is_pinned(case):
    total, ranks, batch_size, drop_last, contiguous, workers = case
    length, positions, resumed = PLAN[case]
    plan = EpochPlan(total, ranks, batch_size, drop_last, workers, contiguous)
    assert plan.length == length
    assert [plan.rank_positions(r).tolist() for r in range(ranks)] == positions
    later = plan.resume(1, world_size=ranks + 1)
    assert [later.rank_positions(r).tolist() for r in range(ranks + 1)] == resumed


@pytest.mark.parametrize("drop_last", [False, True])
def test_the_sampler_and_the_plan_serve_the_same_positions(drop_last):
    """One batch per sample: both serve the same positions of the order, padding and dropping included."""
    for total in range(0, 14):
        for ranks in range(1, 6):
            if drop_last and 0 < total < ranks:  # the sampler refuses: a rank would get nothing
                continue
            shares = [DistributedLocalitySampler([total], ranks, r, shuffle=False, drop_last=drop_last).order(0)
                      for r in range(ranks)]
            plan = EpochPlan(total, ranks, 1, drop_last)
            served = [plan.rank_positions(r).tolist() for r in range(ranks)]
            assert collections.Counter(p for share in shares for p in share.tolist()) == \
                collections.Counter(p for share in served for p in share), (total, ranks)
            assert {len(share) for share in shares} == {len(share) for share in served} == {plan.per_rank}
