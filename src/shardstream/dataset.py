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
from collections.abc import Callable, Iterable
from typing import Any

from .errors import ConfigError
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
from .spec import is_spec, load_spec, spec_source

__all__ = ["FluidInterface", "FluidWrapper", "WebDataset"]

Handler = Callable[[BaseException], bool]


def _lenient(splitter: Any) -> Any:
    """``empty_check=False``: shardstream's splitters let a rank or worker without shards yield nothing."""
    if isinstance(splitter, Stage) and splitter.spec.name in ("split_by_node", "split_by_worker"):
        return Stage(splitter.spec, splitter.args, {**splitter.kwargs, "empty_check": False})
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
    :func:`~shardstream.pipeline.tarfile_to_samples`).
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
    ):
        spec = load_spec(urls) if is_spec(urls) else None  # a dataset spec: its sources, mixed exactly
        super().__init__(seed=seed if seed is not None or spec is None else spec.seed)
        if spec is not None:
            self.append(spec_source(spec, handler=handler, shardshuffle=shardshuffle, nodesplitter=nodesplitter,
                                    workersplitter=workersplitter))
            return
        self.cache_dir = cache_dir  # remote shards only (see the module docstring); local shards are read in place
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
                    self.append(_lenient(as_splitter(splitter)) if not empty_check else as_splitter(splitter))
        cache = cache_opener(cache_dir, None if cache_size is None or cache_size < 0 else cache_size,
                             url_to_name=url_to_name)
        cached = {} if cache is None else {"opener": cache}  # remote shards through the shard cache
        options = dict(cached, zero_copy=True) if zero_copy else cached
        self.append(tarfile_to_samples(handler=handler, select_files=select_files, rename_files=rename_files,
                                       keys=keys, local_paths=True, **options))
        if empty_check:
            self.append(check_empty())


class FluidWrapper(DataPipeline):
    """webdataset's ``FluidWrapper``: the fluid interface over any source.

    >>> list(FluidWrapper([1, 2, 3]).map(lambda x: x * 10))
    [10, 20, 30]
    """

    def __init__(self, initial: Any):
        super().__init__()
        self.append(initial)  # as the source, even when it is a list
