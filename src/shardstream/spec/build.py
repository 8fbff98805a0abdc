"""From a parsed spec to a pipeline: one endless stream per source, mixed exactly (:class:`ExactMix`).

Each source becomes its shard list (chosen per pass when the source has ``resample``/``choose``/``subsample``
shards, as webdataset 0.2 did), shuffled (``shardshuffle``), repeated endlessly (each pass another order), split
between ranks and workers, read (tar shards, or stream files as records) and given its field selection and
renames. :class:`~shardstream.pipeline.ExactMix` takes from each exactly its count per epoch
(:meth:`~shardstream.spec.DatasetSpec.counts`; a source's size comes from ``samples:`` or from its shards'
sidecar indexes). The storage rules of the spec are added (in every process that reads) before the first shard
or index opens, for the spec's own URLs and for as long as its shard lists exist.

>>> from shardstream.testing import write_shards
>>> a = write_shards("a", [4, 4], {"txt": "a"}); b = write_shards("b", [3], {"txt": "b"})
>>> mix = spec_pipeline({"epoch_size": 10, "sources": [{"shards": a, "proportion": 0.7},
...                                                      {"shards": b, "proportion": 0.3}]})
>>> texts = [s["txt"] for s in mix]
>>> texts.count(b"a"), texts.count(b"b")
(7, 3)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import ConfigError
from ..indexed.shardindex import ShardIndex
from ..io.storage_config import StorageRule, add_storage_rules
from ..pipeline import (
    DataPipeline,
    ExactMix,
    as_splitter,
    map as map_stage,
    records_to_samples,
    repeat as repeat_stage,
    reraise_exception,
    shuffle,
    split_by_node,
    split_by_worker,
    tarfile_to_samples,
)
from ..pipeline.context import Context, Source
from ..pipeline.stages.exactmix import ExactMixSource
from .parse import DatasetSpec, SourceSpec, load_spec

__all__ = ["SpecShards", "source_pipeline", "source_sizes", "spec_pipeline", "spec_source", "training_sources"]

Handler = Callable[[BaseException], bool]


class SpecShards(Source):
    """The shard list of one spec source: all its shards, or those drawn for this pass (``resample``: N with
    replacement; ``choose_shards``: N without; ``subsample``: that fraction), the same in every rank and worker
    (drawn from seed, epoch and pass). It holds the spec's storage rules in each process where it exists (made, or
    unpickled and iterated): they apply to the spec's URLs while it lives."""

    def __init__(self, source: SourceSpec, rules: tuple[StorageRule, ...] = ()):
        self.source, self.rules = source, rules
        if rules:
            add_storage_rules(rules, owner=self)

    def iterate(self, ctx: Context) -> Iterator[dict[str, Any]]:
        if self.rules:
            add_storage_rules(self.rules, owner=self)  # in a worker, the copy that was unpickled
        source, urls = self.source, list(self.source.urls)
        rng = ctx.replace(shared=True).rng("spec-shards", source.name)
        if source.resample_shards is not None:
            urls = rng.choices(urls, k=source.resample_shards)
        elif source.choose_shards is not None or source.subsample is not None:
            keep = source.choose_shards or max(1, round(len(urls) * (source.subsample or 1.0)))
            rng.shuffle(urls)
            urls = urls[:keep]
        for url in urls:
            yield {"url": url}

    def __repr__(self) -> str:
        return f"SpecShards({self.source.name!r}, {len(self.source.urls)} shards)"


def source_pipeline(source: SourceSpec, rules: tuple[StorageRule, ...] = (), *, handler: Handler = reraise_exception,
                    shardshuffle: int | bool | None = None, nodesplitter: Any = split_by_node,
                    workersplitter: Any = split_by_worker, reader: Mapping[str, Any] | None = None) -> DataPipeline:
    """The endless sample stream of one source (see the module docstring). ``reader``: options of its tar
    sources' shard reader (:func:`~shardstream.pipeline.tarfile_to_samples`: ``opener`` for the shard cache,
    ``zero_copy``, ``select_files``...)."""
    pipeline = DataPipeline(SpecShards(source, rules))
    if shardshuffle:
        size = 100 if shardshuffle is True else int(shardshuffle)
        pipeline.append(shuffle(size, initial=size))
    pipeline.append(repeat_stage())
    for splitter in (nodesplitter, workersplitter):
        if splitter is not None:
            pipeline.append(as_splitter(splitter))
    if source.format == "tar":
        pipeline.append(tarfile_to_samples(handler=handler, **(reader or {})))
    else:
        pipeline.append(records_to_samples(format=source.format, handler=handler))
    if source.fields is not None or source.rename:
        pipeline.append(map_stage(source.transform))
    return pipeline


def source_sizes(spec: DatasetSpec) -> list[int | None]:
    """Each source's samples: ``samples:``, else the sum of its tar shards' sidecar indexes (scaled to the shards
    a pass takes), else None."""

    sizes: list[int | None] = []
    for source in spec.sources:
        if source.samples is not None or source.format != "tar":
            sizes.append(source.samples)
            continue
        try:
            total = sum(len(ShardIndex.load(url)) for url in source.urls)
        except (OSError, ValueError):
            sizes.append(None)
            continue
        taken = source.resample_shards or source.choose_shards or (
            max(1, round(len(source.urls) * source.subsample)) if source.subsample else len(source.urls))
        sizes.append(round(total * taken / len(source.urls)))
    return sizes


def spec_source(spec: DatasetSpec, *, handler: Handler = reraise_exception, shardshuffle: int | bool | None = None,
                nodesplitter: Any = split_by_node, workersplitter: Any = split_by_worker,
                reader: Mapping[str, Any] | None = None) -> ExactMixSource:
    """The source of a spec's pipeline (what ``WebDataset(spec)`` starts with): its sources' streams, mixed.
    ``reader``: the tar sources' shard reader options (see :func:`source_pipeline`)."""
    rules = spec.storage_rules()
    pipelines = [source_pipeline(s, rules, handler=handler, shardshuffle=shardshuffle, nodesplitter=nodesplitter,
                                 workersplitter=workersplitter, reader=reader)
                 for s in spec.sources]  # their rules are in force
    counts = spec.counts(source_sizes(spec) if any(
        s.samples is None and not s.shares and s.choose is None for s in spec.sources) else None)
    return ExactMixSource(pipelines, counts)


def spec_pipeline(spec: Any, *, handler: Handler = reraise_exception, shardshuffle: int | bool | None = None,
                  nodesplitter: Any = split_by_node, workersplitter: Any = split_by_worker,
                  seed: int | str | None = None, allow_commands: bool = False) -> ExactMix:
    """The exact mix of a spec's sources (a path, a dict or a :class:`DatasetSpec`), as a pipeline with the fluid
    methods. ``seed`` defaults to the spec's. ``WebDataset(spec)`` is the same mix."""
    spec = load_spec(spec, allow_commands=allow_commands)
    source = spec_source(spec, handler=handler, shardshuffle=shardshuffle, nodesplitter=nodesplitter,
                         workersplitter=workersplitter)
    return ExactMix(source.datasets, source.counts, seed=spec.seed if seed is None else seed)


def training_sources(spec: Any, allow_commands: bool = False) -> tuple[list[str], list[int], DatasetSpec]:
    """For ``TrainingDataset(spec)`` (random access): every source's shards in order, how many shards each source
    has, and the parsed spec (its counts need the sources' sizes, known once the shards are indexed). Only tar
    sources of whole shard lists: per-source fields, renames and shard draws are the streaming path's
    (``WebDataset(spec)``)."""
    spec = load_spec(spec, allow_commands=allow_commands)
    for source in spec.sources:
        unsupported = [k for k, v in (("format", source.format != "tar"), ("fields", source.fields is not None),
                                      ("rename", bool(source.rename)),
                                      ("resample/choose/subsample shards", source.resample_shards or
                                       source.choose_shards or source.subsample)) if v]
        if unsupported:
            raise ConfigError(f"{spec.document}: TrainingDataset reads tar sources by random access; source "
                              f"{source.name!r} uses {', '.join(unsupported)}: use WebDataset(spec) for it")
    if spec.storage_rules():  # for the process (TrainingDataset keeps no object of the spec), its URLs only
        add_storage_rules(spec.storage_rules())
    return [url for s in spec.sources for url in s.urls], [len(s.urls) for s in spec.sources], spec
