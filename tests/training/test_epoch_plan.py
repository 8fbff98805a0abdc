"""The epoch plan: exact epochs across ranks and workers, equal batch counts, pad/drop, resume and elastic resume."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.errors import ConfigError
from shardstream.training import EpochPlan

plans = st.builds(
    EpochPlan,
    total=st.integers(0, 200),
    world_size=st.integers(1, 5),
    batch_size=st.integers(1, 7),
    drop_last=st.booleans(),
    num_workers=st.integers(1, 4),
    contiguous=st.booleans(),
)


def served(plan: EpochPlan, upto: int | None = None) -> list[int]:
    """Every position served by every rank, batches ``skip .. upto`` (default: to the end)."""
    end = plan.num_batches if upto is None else upto
    return [p for r in range(plan.world_size) for j in range(plan.skip, end) for p in plan.positions(r, j).tolist()]


def check_exact(plan: EpochPlan, positions: list[int], total: int, *, extra: int, missing: int) -> None:
    counts = collections.Counter(positions)
    assert set(counts) <= set(range(total))
    if plan.drop_last:
        assert max(counts.values(), default=1) == 1
        assert total - len(counts) < missing or total == len(counts)
    else:
        assert set(counts) == set(range(total))
        assert sum(counts.values()) - total < extra or sum(counts.values()) == total


@settings(max_examples=200, deadline=None)
@given(plan=plans)
def test_every_sample_once_and_equal_batches_on_every_rank(plan):
    check_exact(plan, served(plan), plan.total, extra=plan.world_size, missing=plan.world_size * plan.batch_size)
    for j in range(plan.num_batches):  # the same batch sizes on every rank: DDP never waits for a missing step
        assert len({len(plan.positions(r, j)) for r in range(plan.world_size)}) == 1
    if plan.drop_last:
        assert all(len(plan.positions(0, j)) == plan.batch_size for j in range(plan.num_batches))


@settings(max_examples=100, deadline=None)
@given(plan=plans)
def test_workers_share_out_the_batches_and_read_their_run_in_order(plan):
    produced = sorted(j for w in range(plan.num_workers) for j in plan.batches(w, plan.num_workers))
    assert produced == list(range(plan.num_batches))
    if plan.contiguous and plan.total:  # a worker's batches follow each other in the work sequence
        for w in range(plan.num_workers):
            runs = [plan.work_positions(0, j) for j in plan.batches(w, plan.num_workers)]
            flat = np.concatenate(runs) if runs else np.zeros(0)
            assert (np.diff(flat) == 1).all()


@settings(max_examples=150, deadline=None)
@given(plan=plans, cut=st.floats(0, 1))
def test_resuming_with_the_same_layout_continues_exactly(plan, cut):
    c = int(cut * plan.num_batches)
    later = plan.resume(c)
    for r in range(plan.world_size):
        assert [later.positions(r, j).tolist() for j in range(later.skip, later.num_batches)] == \
               [plan.positions(r, j).tolist() for j in range(c, plan.num_batches)]
    assert later.remaining_batches == plan.num_batches - c


@settings(max_examples=200, deadline=None)
@given(plan=plans, cut=st.floats(0, 1), world=st.integers(1, 5), batch=st.integers(1, 7), workers=st.integers(1, 4))
def test_elastic_resume_serves_the_rest_exactly(plan, cut, world, batch, workers):
    c = int(cut * plan.num_batches)
    before = served(plan, c)
    later = plan.resume(c, world_size=world, batch_size=batch, num_workers=workers)
    positions = before + served(later)
    counts = collections.Counter(positions)
    if plan.drop_last:  # nothing twice; the leftovers of both plans may be left out
        assert max(counts.values(), default=1) == 1
        assert plan.total - len(counts) < plan.world_size * plan.batch_size + world * batch or not plan.total
    else:  # everything at least once; only padding twice
        assert set(counts) == set(range(plan.total))
        assert len(positions) - plan.total <= (plan.world_size - 1) + (world - 1)


def test_fewer_samples_than_ranks_still_gives_every_rank_a_batch():
    plan = EpochPlan(total=3, world_size=4, batch_size=2)
    assert [plan.rank_positions(r).tolist() for r in range(4)] == [[0], [1], [2], [0]]
    assert EpochPlan(total=3, world_size=4, batch_size=2, drop_last=True).num_batches == 0


def test_invalid_plans_and_states_are_refused():
    with pytest.raises(ConfigError, match="world_size"):
        EpochPlan(total=3, world_size=0)
    with pytest.raises(ConfigError, match="origin"):
        EpochPlan(total=3, origin=((2, 5),))
    with pytest.raises(ConfigError, match="consumed"):
        EpochPlan(total=10, batch_size=2).resume(6)
