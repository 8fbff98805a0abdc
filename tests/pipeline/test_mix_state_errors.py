"""A state that cannot be restored is a StateError (a ConfigError too, so older handlers still catch it), for the
exact mix's schedule walk and sampler, and for an epoch plan resumed after more batches than it has (issue 27)."""

from __future__ import annotations

import pytest

from shardstream.errors import ConfigError, StateError
from shardstream.indexed.mixsampler import ExactMixSampler
from shardstream.pipeline.schedule import Schedule
from shardstream.training.plan import EpochPlan


def test_the_mix_sampler_refuses_a_state_of_other_counts_with_a_state_error():
    sampler = ExactMixSampler([30, 30], [20, 20], seed=3)
    it = iter(sampler)
    next(it)
    state = sampler.state_dict()
    with pytest.raises(StateError, match="cannot restore ExactMixSampler: saved counts"):
        ExactMixSampler([30, 30], [10, 20]).load_state_dict(state)
    with pytest.raises(StateError, match="'taken/"):
        ExactMixSampler([30, 30], [20, 20]).load_state_dict(dict(state, taken=[99, 0]))


def test_a_schedule_walk_refuses_a_state_that_does_not_fit_with_a_state_error():
    with pytest.raises(StateError, match="'taken/"):
        Schedule([3, 2]).walk(state={"taken": [0, 3]})
    with pytest.raises(ConfigError, match="part 3 of 3") as info:  # not a state: the walk asked for
        Schedule([3]).walk(3, 3)
    assert not isinstance(info.value, StateError)


def test_an_epoch_plan_resumed_past_its_end_is_a_state_error():
    with pytest.raises(StateError, match="a state says 6 batches were consumed"):
        EpochPlan(total=10, batch_size=2).resume(6)
    assert issubclass(StateError, ConfigError)
