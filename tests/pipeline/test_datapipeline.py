"""DataPipeline: sources, composition without mutation, epochs, repeat/with_epoch/with_length."""

from __future__ import annotations

import pytest

from shardstream.errors import ConfigError
from shardstream.pipeline import (
    DataPipeline,
    SimpleShardList,
    batched,
    map,
    repeat,
    shuffle,
    with_epoch,
    with_length,
)


def test_sources_iterables_callables_and_nested_pipelines():
    assert list(DataPipeline(range(3))) == [0, 1, 2]
    assert list(DataPipeline(lambda: iter("ab"))) == ["a", "b"]
    assert list(DataPipeline(DataPipeline(range(3)), map(lambda x: x * 2))) == [0, 2, 4]
    assert list(DataPipeline([range(3), map(str)])) == ["0", "1", "2"]  # lists of stages are flattened
    with pytest.raises(ConfigError):
        iter(DataPipeline())
    with pytest.raises(ConfigError):
        iter(DataPipeline(range(2), 5))
    with pytest.raises(ConfigError, match=r"call it, e.g. batched\(...\)"):
        iter(DataPipeline(range(2), batched))


def test_compose_returns_a_new_pipeline():
    base = DataPipeline(range(4))
    doubled = base.map(lambda x: x * 2)
    assert list(base) == [0, 1, 2, 3] and list(doubled) == [0, 2, 4, 6]
    assert len(base.pipeline) == 1 and len(doubled.pipeline) == 2


def test_plain_generator_functions_are_stages():
    def evens(source):
        for x in source:
            if x % 2 == 0:
                yield x

    assert list(DataPipeline(range(6), evens)) == [0, 2, 4]
    assert list(DataPipeline(range(6)).compose(evens)) == [0, 2, 4]


def test_epochs_auto_advance_unless_set():
    p = DataPipeline(range(30), shuffle(30))
    first, second = list(p), list(p)
    assert first != second and p.epoch == 2
    p.set_epoch(0)
    assert list(p) == first
    p.set_epoch(1)
    assert list(p) == second


def test_seed_changes_the_order():
    assert list(DataPipeline(range(30), shuffle(30), seed=1)) != list(DataPipeline(range(30), shuffle(30), seed=2))


def test_set_epoch_reaches_nested_sources():
    inner = DataPipeline(range(20), shuffle(20))
    outer = DataPipeline(inner)
    outer.set_epoch(5)
    assert inner.epoch == 5


def test_with_epoch_repeats_and_truncates_with_fresh_shuffles():
    p = DataPipeline(range(5), shuffle(5)).with_epoch(12)
    out = list(p)
    assert len(out) == 12 and sorted(out[:5]) == list(range(5)) and sorted(out[5:10]) == list(range(5))
    assert out[:5] != out[5:10] or out[5:10] != out[10:] + out[:3]  # cycles are reshuffled
    assert len(list(DataPipeline(range(5)).with_epoch(3))) == 3


def test_epoch_stages_apply_to_the_output_even_when_called_early():
    p = DataPipeline(range(100)).with_epoch(3).batched(4)  # 3 batches, as in webdataset
    assert [len(b) for b in p] == [4, 4, 4]
    assert isinstance(p.pipeline[-1].spec.name, str) and p.pipeline[-1].spec.name == "with_epoch"
    explicit = DataPipeline(range(100), with_epoch(3), batched(4))  # explicit order is kept as written
    assert [len(b) for b in explicit] == [3]


def test_repeat():
    assert list(DataPipeline(range(2)).repeat(3)) == [0, 1] * 3
    assert list(DataPipeline(range(2)).repeat(nbatches=5)) == [0, 1, 0, 1, 0]
    assert list(DataPipeline(range(0)).repeat()) == []  # an empty source does not spin forever
    assert list(DataPipeline(range(0)).with_epoch(10)) == []
    assert list(repeat(2)(iter([1, 2]))) == [1, 2]  # on a bare iterator there is nothing to restart


def test_with_length_declares_len_only():
    p = DataPipeline(range(5))
    with pytest.raises(TypeError, match="with_length"):
        len(p)
    q = p.with_length(3).map(str)
    assert len(q) == 3 and list(q) == ["0", "1", "2", "3", "4"]
    assert len(DataPipeline(range(5), with_length(n=7))) == 7


def test_repr_lists_the_stages():
    text = repr(DataPipeline(SimpleShardList("a-{0..1}.tar"), shuffle(10), batched(2)))
    assert "SimpleShardList" in text and "shuffle(10)" in text and "batched(2)" in text
