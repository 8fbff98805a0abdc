"""shardstream.resume.fields, the one checker of restored fields: types, ranges, paths, short messages."""

from __future__ import annotations

import random

import pytest

from shardstream.errors import StateError
from shardstream.pipeline.cursors import ReplayCursor, rng_state, set_rng_state
from shardstream.resume.fields import MAX_REPLAY, field, ints, mapping, random_state, shown, within


def test_a_field_of_the_expected_type_and_range_is_returned_plain():
    assert field({"n": 3}, "n", int, lo=0, hi=3, what="x") == 3
    assert field({"xs": (1, 2)}, "xs", list, length=2, what="x") == [1, 2]
    assert field({"u": None}, "u", str, none=True, what="x") is None
    assert field({"b": False}, "b", bool, what="x") is False
    assert field({"d": {}}, "d", (dict, int), what="x") == {}


@pytest.mark.parametrize("value, expected", [
    (True, "is True; expected an integer in 0..9"),  # a bool is not a count
    (1.0, "is 1.0; expected an integer in 0..9"),
    (-1, "is -1; expected an integer in 0..9"),
    (10, "is 10; expected an integer in 0..9"),
    (2**62, "is 4611686018427387904; expected an integer in 0..9"),
    (10**400, "is an integer of 1329 bits; expected an integer in 0..9"),
    (None, "is None; expected an integer in 0..9"),
    ("3", "is '3'; expected an integer in 0..9"),
    (list(range(10_000)), "is [0, 1, 2, 3, 4, 5, ...]; expected an integer in 0..9"),
])
def test_a_wrong_field_is_a_state_error_naming_its_path_and_what_was_expected(value, expected):
    with within("chain", "upstream"), pytest.raises(StateError) as info:
        field({"items": value}, "items", int, lo=0, hi=9, what="stage 2 (slice)")
    message = str(info.value)
    assert message.startswith(f"cannot restore stage 2 (slice): the state's 'chain/upstream/items' {expected}")
    assert len(message) < 300


def test_missing_keys_and_non_dicts_are_named():
    with within("plan"), pytest.raises(StateError, match=r"the state's 'plan' lacks the key 'skip'"):
        field({}, "skip", int, what="this dataset")
    with within("plan"), pytest.raises(StateError, match=r"the state's 'plan' is 7; expected a dict"):
        mapping(7, "this dataset")
    with pytest.raises(StateError, match=r"the state lacks the keys 'a', 'b'"):
        mapping({}, "x", ("a", "b"))


def test_lists_of_counts_are_checked_item_by_item():
    assert ints({"taken": [0, 2]}, "taken", length=2, hi=[1, 2], what="x") == [0, 2]
    with pytest.raises(StateError, match=r"'taken/0' is 2; expected an integer in 0\.\.1"):
        ints({"taken": [2, 2]}, "taken", length=2, hi=[1, 2], what="x")
    with pytest.raises(StateError, match=r"'taken' has 3 items; expected 2"):
        ints({"taken": [0, 0, 0]}, "taken", length=2, what="x")
    with pytest.raises(StateError, match=r"'taken/1' is 'a'"):
        ints({"taken": [0, "a"]}, "taken", what="x")


def test_a_random_generator_state_is_checked_before_it_is_set():
    rng = random.Random(5)
    saved = rng_state(rng)
    expected = rng.random()
    set_rng_state(rng, saved)
    assert rng.random() == expected
    bad_word = [saved[0], saved[1][:-2] + [2**40, 0], saved[2]]
    for state, words in [(bad_word, r"'rng/1/623' is 1099511627776"), ([2, saved[1], None], r"'rng/0' is 2"),
                         ([3, saved[1][:10], None], r"'rng/1' has 10 items; expected 625"),
                         ([3, saved[1], "x"], r"'rng/2' is 'x'; expected a float or None"), ("rng", r"'rng' is 'rng'")]:
        with pytest.raises(StateError, match=words):
            random_state({"rng": state}, "rng", what="stage 1 (shuffle)")


def test_shown_is_short_for_anything():
    nested: list = []
    for _ in range(10_000):
        nested = [nested]
    assert shown(nested) == "[[[[...]]]]"
    assert shown(10**5000) == "an integer of 16610 bits"
    assert len(shown("x" * 10**6)) < 50


def test_a_shard_list_is_replayed_at_most_max_replay_items():
    endless = ReplayCursor(lambda: iter(int, 1), "the shard list", MAX_REPLAY)  # never ends
    with pytest.raises(StateError, match=rf"'items' is {2**40}; expected an integer in 0\.\.{MAX_REPLAY}"):
        endless.load_state_dict({"items": 2**40})
    endless.load_state_dict({"items": 5})
    assert endless.n == 5
