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
continue from there (a :mod:`shardstream.resume` state of kind ``"pipeline"``). Inside DataLoader workers, torchdata's ``StatefulDataLoader`` saves and restores each
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
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..resume import Resumable
from ..runtime import Placement
from .context import Context
from .core import FluidInterface, Stage
from .cursors import Cursor, NestedCursor
from .iteration import PipelineIterator, check

__all__ = ["DataPipeline", "IterableDatasetBase"]


def _iterable_dataset_base() -> type:
    """``torch.utils.data.IterableDataset`` when torch is installed, else ``object``."""
    try:
        from torch.utils.data import IterableDataset  # noqa: PLC0415 - optional: shardstream[torch]
    except ImportError:
        return object
    return IterableDataset


if TYPE_CHECKING:  # a class, not a variable, so that a misspelt method of a pipeline is a type error
    from torch.utils.data import IterableDataset as IterableDatasetBase
else:
    IterableDatasetBase: type = _iterable_dataset_base()


class DataPipeline(Resumable, FluidInterface, IterableDatasetBase):
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
        self._pending = None  # a state to continue from at the next iter()
        self._progress = None  # the latest iterator made in this process (see Resumable)

    # -- building ---------------------------------------------------------------------------------------------
    def append(self, stage: Any) -> None:
        """Append a stage to *this* pipeline, in place (used while constructing one)."""
        self.pipeline.append(stage)

    def compose(self, *stages: Callable[..., Any]) -> DataPipeline:
        """A copy of this pipeline with ``stages`` added at the end (before any trailing epoch-level stage:
        ``with_epoch``, ``repeat``, ``with_length`` always apply to the pipeline's output, as in webdataset)."""
        result = copy.copy(self)
        result._pending = result._progress = None
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

    def stage(self, i: int) -> Any:
        """The ``i``-th element of the pipeline (its source is 0), as in webdataset.

        >>> DataPipeline(range(3), lambda src: src).stage(0)
        range(0, 3)
        """
        return self.pipeline[i]

    def invoke(self, f: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one element of a pipeline by webdataset's rule: a class-based stage's ``run``, an iterable's
        iterator, or a call."""
        if callable(getattr(f, "run", None)) and not isinstance(f, Stage):
            return f.run(*args, **kwargs)
        if not args and not kwargs and not callable(f) and hasattr(f, "__iter__"):
            return iter(f)
        if callable(f):
            return f(*args, **kwargs)
        raise ConfigError(f"{f!r} is neither a stage, an iterable nor a callable")

    def iterator1(self) -> Iterator[Any]:
        """One pass over the pipeline (``iter(self)``; webdataset's name)."""
        return iter(self)

    iterator = iterator1

    def close(self) -> None:
        """End the iteration in progress in this process (open shards are closed) and close the elements that
        can be closed. Iterating again starts afresh. Also what ``with pipeline:`` does at the end.

        >>> with DataPipeline(range(3)) as p:
        ...     next(iter(p))
        0
        """
        progress, self._progress = self._progress, None
        closer = getattr(getattr(progress, "iterator", None), "close", None)
        if callable(closer):
            closer()
        for item in self.pipeline:
            if item is not self and not isinstance(item, Stage) and callable(getattr(item, "close", None)):
                item.close()

    def __enter__(self) -> DataPipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- epochs -----------------------------------------------------------------------------------------------
    def _epoch_set(self, epoch: int) -> None:
        """Pass a user's epoch on to the source and stages that have a ``set_epoch`` of their own."""
        for item in self.pipeline:
            if item is not self and not isinstance(item, Stage) and callable(getattr(item, "set_epoch", None)):
                item.set_epoch(epoch)

    # -- iterating --------------------------------------------------------------------------------------------
    def _context(self) -> tuple[Context, int]:
        """The context of an iteration starting now, here, and the index of the last splitter."""
        if not self.pipeline:
            raise ConfigError("this DataPipeline is empty: give it a source, e.g. DataPipeline(SimpleShardList(urls))")
        placement = Placement.current(self._framework)
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
        pending = self._take_pending()
        if pending is not None:
            iterator.load_state_dict(pending)
        else:
            iterator.cursors()  # errors in the pipeline's description show up here, as with generators
        iterator.progress = self._begin(iterator.ctx.epoch, iterator)
        return iterator

    def cursor(self, ctx: Context | None = None) -> Cursor:
        """This pipeline as the source of another one: its iterator, saved under ``"source"``. With ``ctx``, the
        outer pipeline's epoch is handed on (unless it is a DataLoader's per-pass epoch, which means nothing).

        >>> outer = DataPipeline(DataPipeline(range(3)), lambda src: (x * 2 for x in src))
        >>> list(outer)
        [0, 2, 4]
        """
        meaningful = ctx is not None and ctx.loader_seed is None
        return NestedCursor(self, type(self).__name__, ctx.epoch if meaningful else None)  # type: ignore[union-attr]

    # -- resuming ---------------------------------------------------------------------------------------------
    def _initial_state(self) -> dict[str, Any]:
        """The start of the next epoch (what ``state_dict()`` says before any iteration)."""
        ctx, last_split = self._context()
        return {**PipelineIterator(self, ctx, last_split).head(), "loader_seed": None, "chain": None}

    def _check_state(self, state: Any) -> None:
        """Refuse a state of another pipeline, seed, rank or worker (a :class:`~shardstream.errors.StateError`)."""
        ctx, last_split = self._context()
        check(state, PipelineIterator(self, ctx, last_split).fingerprint(), "this pipeline")

    def __len__(self) -> int:
        for item in reversed(self.pipeline):
            if isinstance(item, Stage) and item.spec.length is not None:
                return int(item.spec.length(**item.arguments))
        raise TypeError(f"{type(self).__name__} is a stream and has no length; declare one with .with_length(n)")

    def __repr__(self) -> str:
        inner = ",\n  ".join(getattr(s, "__name__", None) or repr(s) for s in self.pipeline)
        return f"{type(self).__name__}(\n  {inner}\n)"
