"""The public surface is pinned: every exported name resolves, and ``__all__`` lists are sorted and complete."""

from __future__ import annotations

import importlib

import pytest

import shardstream

PACKAGES = [
    "shardstream.errors",
    "shardstream.tar",
    "shardstream.samples",
    "shardstream.codecs",
    "shardstream.io",
    "shardstream.writer",
    "shardstream.pipeline",
    "shardstream.indexed",
    "shardstream.training",
]

#: what users of webdataset 1.0.2 reach for as `wds.NAME`
WEBDATASET_NAMES = """
    DataPipeline WebDataset WebLoader FluidWrapper SimpleShardList ResampledShards TarWriter ShardWriter Decoder
    tarfile_to_samples shuffle decode to_tuple map map_dict map_tuple select rename rename_keys batched unbatched
    slice rsample repeat with_epoch with_length split_by_node split_by_worker single_node_only
    reraise_exception warn_and_continue ignore_and_continue warn_and_stop ignore_and_stop handle_extension
    imagehandler pipelinefilter Processor extract_keys torch_video torch_audio DecodingError RandomMix RoundRobin
""".split()


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name):
    module = importlib.import_module(name)
    exported = module.__all__
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names missing attributes: {missing}"


@pytest.mark.parametrize("name", WEBDATASET_NAMES)
def test_webdataset_names_are_available_at_the_top(name):
    assert getattr(shardstream, name) is not None


def test_every_lazy_top_level_name_resolves():
    for name in dir(shardstream):
        if not name.startswith("_"):
            getattr(shardstream, name)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_thing'"):
        shardstream.not_a_thing  # noqa: B018
