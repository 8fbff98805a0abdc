"""DataPipeline: a source followed by stages, iterated afresh for every epoch.

``DataPipeline(source, stage, stage, ...)`` is a recipe: it holds no iteration state besides the epoch
number. Each ``iter()`` builds the chain of generators inside the process that iterates it (a DataLoader
worker, say), with a :class:`~shardstream.pipeline.core.Context` that gives every random choice its seed:
``(seed, epoch)`` (and the rank and worker once the data has been split). Any ``iterator -> iterator``
callable can be a stage. With torch installed it is a ``torch.utils.data.IterableDataset``.

Epochs: ``set_epoch(n)`` makes the next iteration epoch ``n``; without it, each iteration of the same object
uses the next epoch (0, 1, 2...; an iteration counts once its iterator yields an item). In a DataLoader worker, where the object is a fresh copy every pass, an
epoch that was never set is combined with the seed the DataLoader draws for each pass, so orders still change
between epochs (call ``set_epoch`` every epoch to make them reproducible from the epoch number alone, and
always in multi-rank training).

Resuming: ``state_dict()`` says where the current iteration is (every stage that keeps something between items
saves it; see :mod:`~shardstream.pipeline.cursors`), and ``load_state_dict(state)`` makes the next ``iter()``
continue from there. Inside DataLoader workers, torchdata's ``StatefulDataLoader`` saves and restores each
worker's iterator the same way.

>>> p = DataPipeline(range(10), lambda src: (x * x for x in src))
>>> list(p)[:4]
[0, 1, 4, 9]
>>> q = p.map(lambda x: -x)  # fluid methods return a new pipeline; p is unchanged
>>> list(q)[:3], len(p.pipeline), len(q.pipeline)
([0, -1, -4], 2, 3)
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..errors import ConfigError
from .core import Context, FluidInterface, Source, Stage
from .placement import Placement
from .resumable import PipelineIterator, check

__all__ = ["DataPipeline", "IterableDatasetBase"]


def _iterable_dataset_base() -> type:
    """``torch.utils.data.IterableDataset`` when torch is installed, else ``object``."""
    try:
        from torch.utils.data import IterableDataset
    except ImportError:
        return object
    return IterableDataset


IterableDatasetBase: type = _iterable_dataset_base()


class _Upstream:
    """The stages before a restarting stage (repeat, with_epoch): a re-iterable; each pass is a new cycle."""

    def __init__(self, pipeline: "DataPipeline", stages: list[Any], ctx: Context, last_split: int):
        self._pipeline, self._stages, self._ctx, self._last_split = pipeline, stages, ctx, last_split
        self._passes = 0

    def __iter__(self) -> Iterator[Any]:
        ctx = self._ctx.replace(cycle=(*self._ctx.cycle, self._passes))
        self._passes += 1
        return self._pipeline._chain(self._stages, ctx, self._last_split)


def _open_source(source: Any, ctx: Context) -> Iterator[Any]:
    if isinstance(source, Source):
        return source.iterate(ctx)
    if isinstance(source, Iterable):
        return iter(source)
    if callable(source):
        return iter(source())
    raise ConfigError(f"the first element of a pipeline must be iterable or a callable returning an iterator, "
                      f"not {source!r}")


class DataPipeline(FluidInterface, IterableDatasetBase):  # type: ignore[misc,valid-type]
    """A data source followed by stages (see the module docstring).

    Lists among ``stages`` are flattened, as in webdataset (``DataPipeline(source, [stage, stage])``), so a
    list of *items* as the source must be wrapped: ``DataPipeline(tuple(items))`` or ``FluidWrapper(items)``.

    ``seed`` (default 0) seeds every random stage that has no seed of its own.
    """

    def __init__(self, *stages: Any, seed: int | str | None = None):
        super().__init__()
        self.pipeline: list[Any] = []
        for item in stages:
            if item is None:
                continue
            if isinstance(item, list):
                self.pipeline.extend(item)
            else:
                self.pipeline.append(item)
        self.seed = seed
        self._epoch = 0
        self._epoch_source = "auto"  # "auto": counted here; "user": set_epoch; "loader": pushed by WebLoader
        self._live: weakref.ref[PipelineIterator] | None = None  # the latest iterator made in this process
        self._live_serial = -1
        self._dropped: Any = None  # the state of the latest iterator, dropped before its end (or why it has none)
        self._pending: dict[str, Any] | None = None  # a state to continue from at the next iter()

    # -- building ---------------------------------------------------------------------------------------------
    def append(self, stage: Any) -> None:
        """Append a stage to *this* pipeline, in place (used while constructing one)."""
        self.pipeline.append(stage)

    def compose(self, *stages: Callable[..., Any]) -> "DataPipeline":
        """A copy of this pipeline with ``stages`` added at the end (before any trailing epoch-level stage:
        ``with_epoch``, ``repeat``, ``with_length`` always apply to the pipeline's output, as in webdataset)."""
        result = copy.copy(self)
        result._live = result._pending = result._dropped = None
        pipeline = list(self.pipeline)
        for item in stages:
            if item is None:
                continue
            at = len(pipeline)
            if not (isinstance(item, Stage) and item.at_end):
                while at > 1 and isinstance(pipeline[at - 1], Stage) and pipeline[at - 1].at_end:
                    at -= 1
            pipeline.insert(at, item)
        result.pipeline = pipeline
        return result

    # -- epochs -----------------------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The epoch the next iteration will use."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (shard and sample orders are a function of seed and epoch).

        Also passed on to the source and stages that have a ``set_epoch`` of their own.
        """
        self._epoch, self._epoch_source = int(epoch), "user"
        if self._pending is not None and self._pending["epoch"] != self._epoch:
            self._pending = None
        for item in self.pipeline:
            if item is not self and not isinstance(item, Stage) and callable(getattr(item, "set_epoch", None)):
                item.set_epoch(epoch)

    # -- iterating --------------------------------------------------------------------------------------------
    def _context(self) -> tuple[Context, int]:
        """The context of an iteration starting now, here, and the index of the last splitter."""
        if not self.pipeline:
            raise ConfigError("this DataPipeline is empty: give it a source, e.g. DataPipeline(SimpleShardList(urls))")
        placement = Placement.current()
        # a fresh copy per pass in each DataLoader worker: an epoch nobody set says nothing, so use the
        # DataLoader's per-pass seed (identical in all its workers; ranks may differ, so single rank only)
        mix = self._epoch_source == "auto" and placement.world_size == 1
        ctx = Context(
            seed=0 if self.seed is None else self.seed,
            epoch=self._epoch,
            placement=placement,
            loader_seed=placement.loader_seed if mix else None,
        )
        last_split = max((i for i, s in enumerate(self.pipeline) if isinstance(s, Stage) and s.splits), default=-1)
        return ctx, last_split

    def __iter__(self) -> Iterator[Any]:
        ctx, last_split = self._context()
        iterator = PipelineIterator(self, ctx, last_split)
        pending, self._pending = self._pending, None
        if pending is not None:
            iterator.load_state_dict(pending)
        else:
            iterator._cursors()  # errors in the pipeline's description show up here, as with generators
        self._epoch = iterator.ctx.epoch  # the next epoch once it starts (an unused iterator changes nothing)
        self._live, self._live_serial, self._dropped = weakref.ref(iterator), iterator.serial, None
        return iterator

    # -- resuming ---------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where this pipeline is: its latest iterator's position, a loaded state not used yet, or the start of
        the next epoch. Raises :class:`~shardstream.errors.ConfigError` naming a stage that cannot save its
        position."""
        live = self._live() if self._live is not None else None
        if live is not None:
            return live.state_dict()
        if isinstance(self._dropped, BaseException):
            raise self._dropped
        if self._dropped is not None:
            return dict(self._dropped)
        if self._pending is not None:
            return dict(self._pending)
        ctx, last_split = self._context()
        return {**PipelineIterator(self, ctx, last_split).head(), "loader_seed": None, "chain": None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue from ``state``, which must come from this pipeline (same stages and
        seed) at this rank and worker: anything else raises :class:`~shardstream.errors.ConfigError`."""
        ctx, last_split = self._context()
        check(state, PipelineIterator(self, ctx, last_split).head(), "this pipeline")
        self._pending, self._live, self._dropped, self._epoch = dict(state), None, None, int(state["epoch"])

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_live"] = state["_dropped"] = None  # an iteration in progress (open shards) never travels
        return state

    def _chain(self, stages: list[Any], ctx: Context, last_split: int) -> Iterator[Any]:
        """Chain ``stages``; those before index ``last_split`` (the last splitter) see shared randomness."""
        source: Iterator[Any] = iter(())
        for i, item in enumerate(stages):
            here = ctx.replace(stage=i, shared=i < last_split)
            if i == 0:
                source = _open_source(item, here)
            elif hasattr(item, "spec") and not isinstance(item, Stage):
                raise ConfigError(f"pipeline stage {i} is the stage factory {item.__name__!r}, not a stage: "
                                  f"call it, e.g. {item.__name__}(...)")
            elif isinstance(item, Stage):
                source = item(_Upstream(self, stages[:i], ctx, last_split) if item.restarts else source, here)
            elif callable(item):
                source = item(source)
            else:
                raise ConfigError(f"pipeline stage {i} is not callable: {item!r}")
        return source

    def __len__(self) -> int:
        for item in reversed(self.pipeline):
            if isinstance(item, Stage) and item.spec.name == "with_length":
                return int(item.spec.signature.bind(*item.args, **item.kwargs).arguments["n"])
        raise TypeError(f"{type(self).__name__} is a stream and has no length; declare one with .with_length(n)")

    def __repr__(self) -> str:
        inner = ",\n  ".join(getattr(s, "__name__", None) or repr(s) for s in self.pipeline)
        return f"{type(self).__name__}(\n  {inner}\n)"
