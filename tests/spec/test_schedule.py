"""The exact mixing schedule: exact counts, even spread, equal parts, restore from the counts."""

from __future__ import annotations

import pytest

from shardstream.errors import ConfigError
from shardstream.pipeline.schedule import Schedule

COUNTS = [500, 300, 199]


@pytest.mark.parametrize("epoch", range(3))
def test_each_epoch_has_the_exact_counts(epoch):
    order = list(Schedule(COUNTS, seed=1, epoch=epoch).walk())
    assert [order.count(i) for i in range(3)] == COUNTS


def test_epochs_and_seeds_differ_but_repeat():
    def order(seed, epoch):
        return list(Schedule(COUNTS, seed=seed, epoch=epoch).walk())

    assert order(1, 0) == order(1, 0) != order(1, 1)
    assert order(1, 0) != order(2, 0)


def test_sources_are_spread_evenly():
    order = list(Schedule(COUNTS, seed=3).walk())
    total = sum(COUNTS)
    for start in range(0, total - 100, 37):
        window = order[start:start + 100]
        for i, n in enumerate(COUNTS):
            assert abs(window.count(i) - 100 * n / total) <= 2.5


@pytest.mark.parametrize("parts", [1, 2, 3, 8])
def test_parts_get_equal_counts_and_their_shares(parts):
    schedule = Schedule(COUNTS, seed=4)
    got = [list(schedule.walk(p, parts)) for p in range(parts)]
    assert {len(g) for g in got} == {sum(COUNTS) // parts}
    together = [sum(g.count(i) for g in got) for i in range(3)]
    assert together[:2] == COUNTS[:2] and COUNTS[2] - together[2] == sum(COUNTS) % parts  # the tail is left out
    for g in got:
        for i, n in enumerate(COUNTS):
            assert abs(g.count(i) - n / parts) <= 1
    if parts > 1:
        assert got[0] != got[1]  # each part has its own order


def test_parts_windows_are_even_too():
    for part in range(4):
        order = list(Schedule(COUNTS, seed=2).walk(part, 4))
        for start in range(0, len(order) - 50, 17):
            window = order[start:start + 50]
            assert all(abs(window.count(i) - 50 * n / sum(COUNTS)) <= 2.5 for i, n in enumerate(COUNTS))


@pytest.mark.parametrize("stop", [0, 1, 250, 998])
def test_restore_from_the_state_continues_exactly(stop):
    schedule = Schedule(COUNTS, seed=5, epoch=2)
    walk = schedule.walk(1, 3)
    head = [next(walk) for _ in range(min(stop, walk.remaining))]
    state = walk.state()
    assert list(schedule.walk(1, 3, state=state)) == list(walk)
    assert len(head) == min(stop, sum(COUNTS) // 3) and sum(state["taken"]) == len(head)


def test_bad_inputs():
    with pytest.raises(ConfigError):
        Schedule([])
    with pytest.raises(ConfigError):
        Schedule([3, -1])
    with pytest.raises(ConfigError, match="part 3 of 3"):
        Schedule([3]).walk(3, 3)
    with pytest.raises(ConfigError, match="cannot restore"):
        Schedule([3, 2]).walk(state={"taken": [0, 3]})
    assert list(Schedule([0, 2]).walk()) == [1, 1]
