"""The stage registry: stages declared once give factories, pipeline stages and fluid methods."""

from __future__ import annotations

import inspect
import pickle

import pytest

import shardstream.dataset
import shardstream.loader
from shardstream.pipeline import REGISTRY, Context, DataPipeline, FluidInterface, Placement, Stage, pipelinefilter
from shardstream.pipeline import core
from shardstream.pipeline import batched, map, shuffle, split_by_worker, to_tuple

WEBDATASET_FLUID = {
    "batched", "unbatched", "listed", "unlisted", "shuffle", "map", "decode", "map_dict", "select", "to_tuple",
    "map_tuple", "slice", "rename", "rsample", "rename_keys", "extract_keys", "with_epoch", "with_length", "repeat",
}


def test_every_webdataset_fluid_method_exists_and_comes_from_the_registry():
    for name in WEBDATASET_FLUID:
        assert name in REGISTRY, name
        method = getattr(FluidInterface, name)
        assert method.__qualname__ == f"FluidInterface.{name}"
        params = list(inspect.signature(method).parameters)
        assert params[0] == "self"
        assert params[1:] == list(REGISTRY[name].signature.parameters), name


def test_no_class_redeclares_a_stage_method():
    for cls in (DataPipeline, shardstream.dataset.WebDataset, shardstream.dataset.FluidWrapper,
                shardstream.loader.WebLoader):
        redeclared = set(vars(cls)) & set(REGISTRY)
        assert not redeclared, f"{cls.__name__} re-declares {redeclared}"


def test_factories_check_arguments_when_the_pipeline_is_built():
    with pytest.raises(TypeError, match=r"map\(\)"):
        map()
    with pytest.raises(TypeError, match=r"batched\(\)"):
        batched(2, nonsense=True)


def test_stages_and_contexts_pickle():
    stage = to_tuple("jpg;png", "cls")
    again = pickle.loads(pickle.dumps(stage))
    assert isinstance(again, Stage) and repr(again) == repr(stage)
    assert list(again([{"png": 1, "cls": 2}])) == [(1, 2)]
    assert pickle.loads(pickle.dumps(split_by_worker)).splits
    ctx = Context(seed=3, epoch=2, placement=Placement(1, 2, 0, 1))
    assert pickle.loads(pickle.dumps(ctx)) == ctx


def test_pipelinefilter_curries_without_a_fluid_method():
    def _double(source, factor=2):
        for x in source:
            yield x * factor

    double = pipelinefilter(_double)
    assert list(double(3)([1, 2])) == [3, 6]
    assert not hasattr(FluidInterface, "double") and "double" not in REGISTRY
    assert list(DataPipeline((1, 2), double())) == [2, 4]


def test_a_new_stage_gets_a_fluid_method_immediately():
    @core.stage(name="plus_one_for_test")
    def _plus(source):
        """Add one."""
        return (x + 1 for x in source)

    try:
        assert list(DataPipeline((1, 2)).plus_one_for_test()) == [2, 3]
        assert "Add one." in FluidInterface.plus_one_for_test.__doc__
    finally:
        core.unregister("plus_one_for_test")
    assert not hasattr(FluidInterface, "plus_one_for_test")


def test_context_rng_depends_on_seed_epoch_and_placement_unless_shared():
    base = Context(seed=1, epoch=0, placement=Placement(0, 2, 0, 2))
    other_worker = base.replace(placement=Placement(0, 2, 1, 2))
    draw = lambda c: [c.rng().random() for _ in range(3)]  # noqa: E731
    assert draw(base) == draw(base)
    assert draw(base) != draw(base.replace(epoch=1)) != draw(base.replace(seed=2))
    assert draw(base) != draw(other_worker)
    assert draw(base.replace(shared=True)) == draw(other_worker.replace(shared=True))
    assert draw(base) != draw(base.replace(stage=1)) and draw(base) != draw(base.replace(cycle=(1,)))


def test_stage_called_directly_reads_the_runtime_context():
    assert sorted(shuffle(10)(range(20))) == list(range(20))
