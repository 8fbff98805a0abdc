"""The one resumable base: pending state, the progress record of the latest iterator, epochs, pickling, StateError."""

from __future__ import annotations

import pickle

import pytest

from shardstream.errors import ConfigError, StateError
from shardstream.pipeline import DataPipeline, shuffle
from shardstream.resume import Resumable


def make():
    return DataPipeline(range(30), shuffle(5), seed=1)


def test_a_dropped_iterator_keeps_its_position_without_a_finaliser():
    p = make()
    for i, _ in enumerate(p):
        if i == 6:
            break
    state = p.state_dict()  # the iterator is gone from the loop; the recipe's record still knows it
    assert state["chain"] is not None and p.epoch == 1
    q = make()
    q.load_state_dict(state)
    assert list(q) == list(make())[7:]
    assert not hasattr(DataPipeline, "__del__")


def test_a_loader_epoch_leaves_a_restored_state_and_the_user_epoch():
    p = make()
    it = iter(p)
    next(it)
    state = p.state_dict()
    q = make()
    q.load_state_dict(state)
    q.set_epoch(7, source="loader")
    assert q.epoch_source == "loader" and q.state_dict() == state  # the pending state keeps its epoch
    q.set_epoch(3)
    assert q.epoch_source == "user" and q.state_dict()["chain"] is None and q.state_dict()["epoch"] == 3
    with pytest.raises(ConfigError, match="source="):
        q.set_epoch(1, source="somebody")


def test_set_epoch_to_another_epoch_drops_the_live_position():
    p = make()
    it = iter(p)
    next(it)
    p.set_epoch(0)
    assert p.state_dict()["chain"] is not None  # same epoch: the live position stays
    p.set_epoch(4)
    assert p.state_dict()["epoch"] == 4 and p.state_dict()["chain"] is None


def test_the_progress_record_never_travels():
    p = make()
    it = iter(p)
    next(it)
    copy = pickle.loads(pickle.dumps(p))
    assert copy.state_dict()["chain"] is None and p.state_dict()["chain"] is not None


def test_refusals_are_state_errors_and_still_config_and_value_errors():
    state = make().state_dict()
    with pytest.raises(StateError, match="seed=1, this pipeline has seed=2"):
        DataPipeline(range(30), shuffle(5), seed=2).load_state_dict(state)
    assert issubclass(StateError, ConfigError) and issubclass(StateError, ValueError)


def test_one_state_format_and_states_of_the_old_format_are_refused_saying_so():
    p = make()
    it = iter(p)
    next(it)
    state = p.state_dict()
    assert (state["format"], state["version"], state["kind"]) == ("shardstream.state", 2, "pipeline")
    assert state["fingerprint"] == {"stages": ["range", "shuffle"], "seed": 1, "placement": [0, 1, 0, 1]}
    # the version-1 format: the envelope's fields at the top, named "shardstream.pipeline"
    old = {"format": "shardstream.pipeline", "version": 1, "epoch": 0, "loader_seed": None, "chain": state["chain"],
           **state["fingerprint"]}
    with pytest.raises(StateError, match=r"'shardstream.pipeline' version 1, the format of shardstream before "
                                         r"'shardstream.state' version 2; old states are not restored"):
        make().load_state_dict(old)
    with pytest.raises(StateError, match=r"version 3, this shardstream reads version 2.*saved state has seed=1, "
                                         r"this pipeline has seed=2"):
        DataPipeline(range(30), shuffle(5), seed=2).load_state_dict(dict(state, version=3))  # every difference
    with pytest.raises(StateError, match=r"the state's 'format' is 'other', not 'shardstream.state'"):
        make().load_state_dict(dict(state, format="other"))
    fingerprint = dict(state["fingerprint"], stages=tuple(state["fingerprint"]["stages"]))
    make().load_state_dict(dict(state, fingerprint=fingerprint))  # tuples for lists: the same state


def test_a_plain_iterator_can_be_tracked():
    class Twice(Resumable):
        def __iter__(self):
            return self._track(self.epoch, iter([self.epoch] * 2))

    t = Twice()
    assert list(t) == [0, 0] and list(t) == [1, 1] and t.epoch == 2
    unused = iter(t)
    assert t.epoch == 2 and unused is not None  # an iterator that never yields changes nothing
