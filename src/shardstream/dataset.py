"""WebDataset: the fluid API over tar shards, webdataset 1.0.2's constructor and methods.

``WebDataset(urls)`` is a :class:`~shardstream.pipeline.DataPipeline` that lists the shards, shuffles them
(``shardshuffle=``), splits them between ranks and DataLoader workers, and reads their samples; the fluid
methods (``.shuffle``, ``.decode``, ``.to_tuple``, ``.map``, ``.batched``, ...) are generated from the stage
registry, so they are the very stages of :mod:`shardstream.pipeline`.

Differences from webdataset 1.0.2, all on purpose:

- ``shardshuffle`` and ``.shuffle`` give a different order every epoch, reproducible from ``(seed, epoch)``
  (``seed`` defaults to 0; ``set_epoch(n)`` selects the epoch). The shard order is shuffled *before* it is
  split, with the same random choices in every rank and worker, so each epoch also re-deals shards to workers.
- ``nodesplitter`` defaults to ``split_by_node`` (which is a no-op on one rank), not to an error on many.
- A rank or worker left without shards raises :class:`~shardstream.errors.WorkerSplitError` instead of
  yielding nothing, unless ``empty_check=False`` (then it yields nothing, as in webdataset).
- ``cache_dir``/``cache_size`` (or ``SHARDSTREAM_CACHE_DIR``/``SHARDSTREAM_CACHE_SIZE``) only concern remote
  shards: they are downloaded once into the cache (:class:`shardstream.io.cache.ShardCache`) and read from
  there; local shards are read in place and never copied. ``url_to_name`` names cached files.
- Fluid methods return a new dataset and never modify the one they are called on.
- On several ranks, shards that do not split evenly between them raise
  :class:`~shardstream.errors.UnevenSplitError` when the iteration starts (the ranks would train on different
  numbers of batches and a DDP job would hang), unless the epoch is bounded (``.with_epoch(n)``, an endless
  ``repeat``) or ``equalize=True``; webdataset lets the ranks drift apart.
- ``len()`` needs no ``.with_length(n)`` when every shard's sample count is known from its sidecar index or a
  dataset index (``urls`` may be one: a :class:`~shardstream.indexed.DatasetIndex` or its ``.json`` file). It is
  exactly what this rank yields in the next epoch (inside a DataLoader worker: that worker's part), through the
  stages that keep the count (``decode``, ``map``, ``to_tuple``, ``shuffle``...: assuming no sample fails and no
  map returns None); other stages make it a ``TypeError`` that names them. ``batched``, ``slice`` and
  ``with_epoch`` give counts that depend on the number of DataLoader workers: :meth:`WebDataset.worker_lengths`
  and ``len(WebLoader)`` count them. With shards of different sizes, shuffled, the count can change from epoch to
  epoch (the length is the next epoch's). See docs/integrations.md.
- ``equalize=True``: every rank yields the same number of samples (the ``j``-th shard of each rank keeps the
  smallest count among the ranks' ``j``-th shards; :mod:`shardstream.pipeline.stages.equalize`).

>>> import io, tarfile
>>> with tarfile.open("digits.tar", "w") as tf:
...     for i in range(4):
...         for ext, data in (("txt", str(i).encode()), ("cls", str(i % 2).encode())):
...             info = tarfile.TarInfo(f"s{i}.{ext}"); info.size = len(data); tf.addfile(info, io.BytesIO(data))
>>> ds = WebDataset("digits.tar", shardshuffle=False).decode().to_tuple("txt", "cls").batched(2)
>>> [(list(t), c.tolist()) for t, c in ds]
[(['0', '1'], [0, 1]), (['2', '3'], [0, 1])]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .errors import ConfigError, UnevenSplitError
from .indexed.counts import ShardCounts
from .indexed.dataset_index import DatasetIndex
from .io.cache import cache_opener
from .pipeline import (
    DataPipeline,
    FluidInterface,
    ResampledShards,
    SimpleShardList,
    as_splitter,
    check_empty,
    repeat as repeat_stage,
    reraise_exception,
    shuffle,
    split_by_node,
    split_by_worker,
    tarfile_to_samples,
)
from .pipeline.context import Source
from .pipeline.core import Stage
from .pipeline.shares import ShardShares, count_through
from .pipeline.stages.equalize import equalize as equalize_stage, equalize_shards
from .runtime import Placement
from .spec import is_spec, load_spec, spec_source

__all__ = ["FluidInterface", "FluidWrapper", "WebDataset"]

Handler = Callable[[BaseException], bool]


def _lenient(splitter: Any) -> Any:
    """``empty_check=False``: shardstream's splitters let a rank or worker without shards yield nothing."""
    if isinstance(splitter, Stage) and "empty_check" in splitter.spec.signature.parameters:
        return splitter.replace(empty_check=False)
    return splitter


def _checked(splitter: Any) -> Any:
    """shardstream's ``split_by_node`` in a WebDataset: no warning at the end of an uneven split (the WebDataset
    checks the split before it starts, see :meth:`WebDataset._check_even_split`)."""
    if isinstance(splitter, Stage) and "warn_uneven" in splitter.spec.signature.parameters:
        return splitter.replace(warn_uneven=False)
    return splitter


class WebDataset(DataPipeline):
    """A stream of samples from tar shards, with webdataset's fluid interface (see the module docstring).

    ``urls``: a string (``{000..099}`` brace ranges, ``::`` between lists), a list of URLs or paths, or any
    iterable source of URLs, or a dataset spec (a ``.yaml``/``.yml``/``.json`` file, a dict or a
    :class:`~shardstream.spec.DatasetSpec`: its sources mixed exactly, see docs/specs.md; ``handler``,
    ``shardshuffle`` and the splitters apply to each source). ``resampled=True`` draws shards at random with replacement, endlessly, separately
    in every rank and worker (pair it with ``.with_epoch(n)``). ``handler`` decides what happens to shards and
    samples that cannot be read. ``select_files``/``rename_files`` filter and rename members before grouping;
    ``keys`` is the key rule (see :class:`shardstream.samples.KeyRule`). ``empty_check`` raises when a
    worker's shards yield no sample at all. ``zero_copy=True`` reads uncompressed local shards in place
    (memory-mapped): fields are read-only ``memoryview`` objects instead of ``bytes`` copies (see
    :func:`~shardstream.pipeline.tarfile_to_samples`). ``urls`` may also be a dataset index (its ``.json`` file or a
    :class:`~shardstream.indexed.DatasetIndex`): its shards, with their sample counts. ``equalize=True`` gives
    every rank the same number of samples from the shards' counts (see the module docstring).
    """

    def __init__(
        self,
        urls: Any,
        handler: Handler = reraise_exception,
        mode: Any = None,
        resampled: bool = False,
        repeat: bool = False,
        shardshuffle: bool | int | None = None,
        cache_size: int = -1,
        cache_dir: str | os.PathLike[str] | None = None,
        url_to_name: Any = None,
        detshuffle: bool = False,
        nodesplitter: Callable[..., Any] | None = split_by_node,
        workersplitter: Callable[..., Any] | None = split_by_worker,
        select_files: Callable[[str], bool] | None = None,
        rename_files: Callable[[str], str] | None = None,
        empty_check: bool = True,
        verbose: bool = False,
        seed: int | str | None = None,
        keys: Any = None,
        zero_copy: bool = False,
        equalize: bool = False,
    ):
        spec = load_spec(urls) if is_spec(urls) else None  # a dataset spec: its sources, mixed exactly
        super().__init__(seed=seed if seed is not None or spec is None else spec.seed)
        self.equalize, self._shares = equalize, None
        cache = cache_opener(cache_dir, None if cache_size is None or cache_size < 0 else cache_size,
                             url_to_name=url_to_name)
        cached = {} if cache is None else {"opener": cache}  # remote shards through the shard cache
        options = dict(cached, zero_copy=True) if zero_copy else cached
        self.cache_dir = cache_dir  # remote shards only (see the module docstring); local shards are read in place
        if spec is not None:
            refused = [name for name, given in (("equalize=True", equalize), ("resampled=True", resampled),
                                                ("repeat=True", repeat)) if given]
            if refused:  # a spec's sources are endless and mixed exactly: its draws are set in the spec
                raise ConfigError(f"{', '.join(refused)} cannot apply to a dataset spec: its sources are mixed "
                                  "exactly; draw shards with a source's resample_shards/choose_shards in the spec "
                                  "(docs/specs.md), or pass a list of shard URLs")
            reader = dict(options, select_files=select_files, rename_files=rename_files, keys=keys)
            self.append(spec_source(spec, handler=handler, shardshuffle=shardshuffle, nodesplitter=nodesplitter,
                                    workersplitter=workersplitter, reader=reader))
            return
        counts: dict[str, int] = {}
        if _is_dataset_index(urls):  # its shards, with their sample counts
            index = urls if isinstance(urls, DatasetIndex) else DatasetIndex.load(urls)
            urls = [shard.url for shard in index.shards]
            counts = {shard.url: shard.samples for shard in index.shards}
        if isinstance(urls, Source) or (
            not isinstance(urls, (str, os.PathLike, list, tuple)) and isinstance(urls, Iterable)
        ):
            if resampled:
                raise ConfigError("resampled=True needs a list of URLs, not an iterable source of them")
            self.append(urls)
        elif resampled:
            self.append(ResampledShards(urls))
        else:
            self.append(SimpleShardList(urls))
        if not resampled:
            if shardshuffle is True:
                shardshuffle = 100
            if shardshuffle:
                self.append(shuffle(int(shardshuffle), initial=int(shardshuffle)))
            if repeat:
                self.append(repeat_stage())  # the shard list, forever: each pass is a new cycle, freshly shuffled
            for splitter in (nodesplitter, workersplitter):
                if splitter is not None:
                    splitter = _checked(as_splitter(splitter))
                    self.append(_lenient(splitter) if not empty_check else splitter)
        countable = select_files is None and rename_files is None and keys is None  # samples as the indexes say
        self._shares = _shares(self.pipeline, ShardCounts(counts), equalize) if countable and not repeat else None
        if equalize:
            if self._shares is None:
                raise ConfigError("equalize=True needs a list of shard URLs (or a dataset index) dealt by "
                                  "shardstream's splitters, without resampled=, repeat=, select_files=, "
                                  "rename_files= or keys=")
            self.append(equalize_shards(self._shares))
        self.append(tarfile_to_samples(handler=handler, select_files=select_files, rename_files=rename_files,
                                       keys=keys, local_paths=True, **options))
        if equalize:
            self.append(equalize_stage(self._shares, empty_check))
        if empty_check:
            self.append(check_empty())


    # -- lengths and even splits (see the module docstring) -------------------------------------------------
    def _after_reader(self) -> list[Any]:
        """The stages after the shard reader (those that may change the count of samples)."""
        at = next(i for i, item in enumerate(self.pipeline) if isinstance(item, Stage) and item.spec.reads_shards)
        return self.pipeline[at + 1:]

    def _declared(self) -> bool:
        return any(isinstance(item, Stage) and item.spec.length is not None for item in self.pipeline)

    def _counted_shares(self) -> ShardShares:
        if self._shares is None:
            raise TypeError(f"{type(self).__name__} has no length: its shards are not a list of URLs dealt by "
                            "shardstream's splitters (resampled=, repeat=, a custom splitter, an iterable source or a "
                            "spec), or select_files=/rename_files=/keys= change its samples; declare one with "
                            ".with_length(n)")
        return self._shares

    def worker_lengths(self, num_workers: int, epoch: int | None = None) -> list[int]:
        """The items each of ``num_workers`` DataLoader workers of this rank yields in ``epoch`` (default: the next
        one), from the shards' sample counts (sidecar indexes or a dataset index), without reading a shard.
        ``TypeError`` when they are not known exactly (see the module docstring).

        >>> from shardstream.indexed import indexed_shard_writer
        >>> with indexed_shard_writer("part-%d.tar", maxcount=3) as sink:
        ...     for i in range(7):
        ...         _ = sink.write({"__key__": f"s{i}", "cls": i})
        >>> ds = WebDataset(sink.shards, shardshuffle=False).batched(2)
        >>> ds.worker_lengths(2)  # worker 0 reads part-0 and part-2 (3 + 1 samples), worker 1 part-1 (3)
        [2, 2]
        """
        shares = self._counted_shares()
        if self._declared():
            raise TypeError("this dataset declares its length with .with_length(n): per worker lengths are not known")
        ctx, _ = self._context()
        if epoch is not None:
            ctx = ctx.replace(epoch=int(epoch), loader_seed=None)
        after = self._after_reader()
        return [count_through(after, sum(s.keep for s in part)) for part in shares.workers(ctx, num_workers)]

    def __len__(self) -> int:
        """The samples (or batches...) this rank yields in the next epoch, or in this DataLoader worker: from the
        shards' counts (sidecar indexes, a dataset index) or a ``.with_length(n)``; else ``TypeError``."""
        if self._declared():
            return super().__len__()
        shares = self._counted_shares()
        ctx, _ = self._context()
        after = self._after_reader()
        if ctx.num_workers > 1:  # inside a DataLoader worker: its own part
            return count_through(after, sum(s.keep for s in shares.here(ctx)))
        unknown = [item for item in after if not (isinstance(item, Stage) and item.spec.keeps_count)]
        if unknown:
            count_through(unknown, 1)  # a stage that never has a count names itself
            raise TypeError(f"the length after {unknown[0]!r} depends on how many DataLoader workers share the shards "
                            "(each ends its own batches): len(WebLoader(dataset, ..., num_workers=n)) and "
                            "dataset.worker_lengths(n) know it; or declare it with .with_length(n)")
        return sum(s.keep for s in shares.mine(ctx))

    def __iter__(self) -> Iterator[Any]:
        self._check_even_split()
        return super().__iter__()

    def _check_even_split(self) -> None:
        """Refuse shards that the ranks cannot share evenly when nothing makes their epochs equal (a typed error
        that names the fixes; the ranks would train on different numbers of batches and DDP would hang)."""
        source, stages = self.pipeline[0], [s for s in self.pipeline if isinstance(s, Stage)]
        if self.equalize or not isinstance(source, SimpleShardList):
            return
        if not any(s.spec.deals_to == "ranks" for s in stages) or any(_endless(s) for s in stages):
            return
        placement = Placement.current(self._framework)
        shards, ranks = len(source.urls), placement.world_size
        if ranks > 1 and shards % ranks and shards >= ranks:  # fewer shards: the splitter says who gets none
            raise UnevenSplitError(shards=shards, ranks=ranks)


def _endless(stage: Stage) -> bool:
    """A stage after which every rank's epoch is as long as the user said (``with_epoch``) or endless (a
    ``repeat`` without a count, or with ``nbatches``)."""
    rule = stage.spec.equal_epochs
    return rule is not None and rule(**stage.arguments)


def _is_dataset_index(urls: Any) -> bool:
    """A dataset index (:class:`~shardstream.indexed.DatasetIndex` or its ``.json`` file) rather than shards."""
    return isinstance(urls, DatasetIndex) or (
        isinstance(urls, (str, os.PathLike)) and os.fspath(urls).lower().endswith(".json"))


def _shares(pipeline: list[Any], counts: ShardCounts, equalize: bool) -> ShardShares | None:
    """What a WebDataset's shards and splitters make of each rank's and worker's shards, or None when that
    cannot be worked out ahead (another source, a custom splitter, a stage other than the shard shuffle)."""
    if not isinstance(pipeline[0], SimpleShardList):
        return None
    splits = [i for i, item in enumerate(pipeline) if isinstance(item, Stage) and item.splits]
    deals = {pipeline[i].spec.deals_to for i in splits}
    first = splits[0] if splits else len(pipeline)
    head_ok = all(isinstance(item, Stage) and item.spec.shuffles for item in pipeline[1:first])
    if not head_ok or None in deals:  # a stage other than the shard shuffle, a splitter of its own rule
        return None
    return ShardShares(pipeline[:first], max(splits, default=-1), "ranks" in deals, "workers" in deals, counts,
                       equalize)


class FluidWrapper(DataPipeline):
    """webdataset's ``FluidWrapper``: the fluid interface over any source.

    >>> list(FluidWrapper([1, 2, 3]).map(lambda x: x * 10))
    [10, 20, 30]
    """

    def __init__(self, initial: Any):
        super().__init__()
        self.append(initial)  # as the source, even when it is a list
