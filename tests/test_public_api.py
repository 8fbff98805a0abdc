"""The public surface is pinned: every exported name resolves, and ``__all__`` lists are sorted and complete."""

from __future__ import annotations

import ast
import importlib
import pathlib
import types

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
    "shardstream.resume",
    "shardstream.cluster",
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


#: webdataset's submodule names, reachable as `wds.filters.map`, `wds.handlers.warn_and_continue`...; modules, so
#: not in `__all__`
SUBMODULE_NAMES = set(shardstream._PIPELINE_MODULES)  # webdataset's module names (`wds.filters`...)


def test_top_level_all_is_sorted_and_unique():
    assert shardstream.__all__ == sorted(shardstream.__all__)
    assert len(set(shardstream.__all__)) == len(shardstream.__all__)


def test_every_name_in_top_level_all_resolves():
    missing = [name for name in shardstream.__all__ if getattr(shardstream, name, None) is None]
    assert missing == []


def test_dir_shows_all_and_the_webdataset_submodules():
    public = {name for name in dir(shardstream) if not name.startswith("_")}
    assert public == set(shardstream.__all__) | SUBMODULE_NAMES


def test_nothing_public_by_accident():
    """After every lazy name loads, each public non-module name in the namespace is listed in `__all__`."""
    for name in shardstream.__all__:
        getattr(shardstream, name)
    stray = [
        name
        for name, value in vars(shardstream).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name not in shardstream.__all__
    ]
    assert stray == []
    modules = {name: value.__name__ for name, value in vars(shardstream).items() if isinstance(value, types.ModuleType)}
    foreign = {name: module for name, module in modules.items() if not name.startswith("_")}
    assert all(module.startswith("shardstream.") for module in foreign.values()), foreign


def test_the_exception_tree_and_webdataset_names_are_in_all():
    assert set(shardstream.errors.__all__) <= set(shardstream.__all__)
    assert set(WEBDATASET_NAMES) <= set(shardstream.__all__)


def test_star_import_gives_all():
    namespace: dict = {}
    exec("from shardstream import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(shardstream.__all__)


def test_type_checkers_see_every_lazy_name():
    """The `if TYPE_CHECKING:` imports in __init__.py declare exactly the lazily loaded names, as the same objects."""
    tree = ast.parse(pathlib.Path(shardstream.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
    declared = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        module = importlib.import_module(f"shardstream.{node.module}" if node.module else "shardstream")
        for alias in node.names:
            declared[alias.asname or alias.name] = getattr(module, alias.name)
    assert set(declared) == set(shardstream._PIPELINE_NAMES) | set(shardstream._PIPELINE_MODULES)
    wrong = [name for name, value in declared.items() if getattr(shardstream, name) is not value]
    assert wrong == []
