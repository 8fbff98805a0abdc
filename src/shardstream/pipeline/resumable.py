"""The iterator of a :class:`~shardstream.pipeline.DataPipeline`: a chain of cursors with a versioned state.

:func:`build_chain` turns a pipeline's stages into cursors (:mod:`~shardstream.pipeline.cursors`): the shard list
up to the first shard reader is replayed, the reader and every stage after it get a cursor of their kind.
:class:`PipelineIterator` adds what the chain's state needs to be meaningful: the pipeline's stages (by name),
its seed, the epoch (and the DataLoader seed used when no epoch was set), and where it runs (rank and worker:
a streaming pipeline's position is per rank and worker, since shards are split between them).

>>> from shardstream.pipeline import DataPipeline, map, shuffle
>>> p = DataPipeline(range(6), shuffle(4), map(lambda x: x * 10))
>>> it = iter(p); _ = next(it); state = it.state_dict()
>>> state["format"], state["stages"], state["epoch"]
('shardstream.pipeline', ['range', 'shuffle', 'map'], 0)
>>> DataPipeline(range(6), shuffle(4)).load_state_dict(state)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
shardstream.errors.ConfigError: cannot restore this pipeline: saved state has stages ['range', 'shuffle', 'map'], this pipeline has ['range', 'shuffle']...
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .core import Context, Stage
from .cursors import Cursor, PassCursor, ReplayCursor, UnsupportedCursor, require, source_cursor

if TYPE_CHECKING:  # pragma: no cover
    from .datapipeline import DataPipeline

__all__ = ["FORMAT", "VERSION", "PipelineIterator", "build_chain", "stage_names"]

FORMAT = "shardstream.pipeline"
VERSION = 1
_SERIAL = itertools.count()
_ENDED = ("the iteration is over",)  # the mark of a finished iteration


def stage_names(stages: list[Any]) -> list[str]:
    """The names that identify a pipeline's stages in its state (the source's type, then stage names)."""
    names = []
    for i, item in enumerate(stages):
        if isinstance(item, Stage):
            names.append(item.spec.name)
        elif i == 0:
            names.append(type(item).__name__)
        else:
            names.append(getattr(item, "__name__", None) or type(item).__name__)
    return names


def _label(item: Any, i: int) -> str:
    if isinstance(item, Stage):
        return f"stage {i} ({item.spec.name})"
    return f"stage {i} ({getattr(item, '__qualname__', None) or type(item).__name__})"


def build_chain(pipeline: DataPipeline, stages: list[Any], ctx: Context, last_split: int) -> Cursor:
    """One cursor per stage (see the module docstring); iterating it is iterating the pipeline."""
    from .datapipeline import _open_source, _Upstream

    boundary = next((i for i, s in enumerate(stages) if i and isinstance(s, Stage)
                     and getattr(s.spec.state, "reads_shards", False)), None)
    if boundary is None:
        first, here = stages[0], ctx.replace(stage=0, shared=0 < last_split)
        cursor, start = source_cursor(first, lambda: _open_source(first, here), here), 1
    else:
        head = stages[:boundary]
        upstream = ReplayCursor(lambda: pipeline._chain(head, ctx, last_split), "the shard list")
        reader, here = stages[boundary], ctx.replace(stage=boundary, shared=boundary < last_split)
        cursor, start = reader.spec.state(upstream, reader, here, None, _label(reader, boundary)), boundary + 1
    for i in range(start, len(stages)):
        item, here, name = stages[i], ctx.replace(stage=i, shared=i < last_split), _label(stages[i], i)
        if isinstance(item, Stage):
            kind = item.spec.state
            if item.restarts:
                def restart(cycle: int, i: int = i) -> Cursor:
                    return build_chain(pipeline, stages[:i], ctx.replace(cycle=(*ctx.cycle, cycle)), last_split)
            else:
                restart = None  # type: ignore[assignment]
            if kind == "pass":
                make = lambda src, item=item, here=here: item(src, here)  # noqa: E731
                fuse = type(cursor) is PassCursor
                cursor = cursor.then(make, name) if fuse else PassCursor(cursor, make, name)  # type: ignore[attr-defined]
            elif callable(kind):
                cursor = kind(cursor, item, here, restart, name)
            elif item.restarts:
                upstream = _Upstream(pipeline, stages[:i], ctx, last_split)
                cursor = UnsupportedCursor(cursor, lambda src, item=item, here=here, up=upstream: item(up, here), name)
            else:
                cursor = UnsupportedCursor(cursor, lambda src, item=item, here=here: item(src, here), name)
        elif hasattr(item, "spec"):
            raise ConfigError(f"pipeline stage {i} is the stage factory {item.__name__!r}, not a stage: "
                              f"call it, e.g. {item.__name__}(...)")
        elif callable(item):
            cursor = UnsupportedCursor(cursor, item, name)
        else:
            raise ConfigError(f"pipeline stage {i} is not callable: {item!r}")
    return cursor


class PipelineIterator(Cursor):
    """One iteration of a pipeline: its cursors, built on first use, and its state (see the module docstring)."""

    def __init__(self, pipeline: DataPipeline, ctx: Context, last_split: int):
        self.pipeline, self.ctx, self.last_split = pipeline, ctx, last_split
        self.serial = next(_SERIAL)
        self._chain: Cursor | None = None
        self._done = self._started = False

    def _cursors(self) -> Cursor:
        """The chain of cursors (a finished iteration keeps none: it gets a throwaway one to describe states)."""
        if self._chain is not None:
            return self._chain
        chain = build_chain(self.pipeline, list(self.pipeline.pipeline), self.ctx, self.last_split)
        if not self._done:
            self._chain = chain
        return chain

    @property  # type: ignore[override]
    def restorable(self) -> bool:
        return self._cursors().restorable

    def __next__(self) -> Any:
        if not self._started:  # the pipeline moves on to the next epoch once this one is being served
            self._started = True
            if self.pipeline._epoch == self.ctx.epoch:
                self.pipeline._epoch = self.ctx.epoch + 1
        chain = self._chain
        if chain is None:
            if self._done:
                raise StopIteration
            chain = self._cursors()
        try:
            return next(chain)
        except StopIteration:
            self._done, self._chain = True, None  # release shards and DataLoader workers now
            raise

    def __del__(self) -> None:
        """Dropped before its end (a ``break``): leave the position with the pipeline, whose ``state_dict()``
        still reports it (the iterator's shards and DataLoader workers are released as usual)."""
        try:
            if self._done or self._chain is None or self.pipeline._live_serial != self.serial:
                return
            try:
                snapshot: Any = self.state_dict()
            except Exception as e:  # reported when state_dict() is asked for (its frames would keep this alive)
                snapshot = e.with_traceback(None)
            self.pipeline._dropped = snapshot
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def head(self, epoch: int | None = None) -> dict[str, Any]:
        """The state's description of the pipeline and of this iteration (``chain`` not included)."""
        ctx = self.ctx
        return {
            "format": FORMAT, "version": VERSION, "stages": stage_names(self.pipeline.pipeline),
            "seed": ctx.seed, "epoch": ctx.epoch if epoch is None else epoch, "loader_seed": ctx.loader_seed,
            "placement": [ctx.rank, ctx.world_size, ctx.worker, ctx.num_workers],
        }  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """Where this iteration is; once it is over, the start of the next epoch."""
        return self.state_at(self.mark())

    def mark(self) -> Any:
        """A cheap position (this pipeline under another one: a shuffle buffer keeps one per item)."""
        return _ENDED if self._done else self._cursors().mark()

    def state_at(self, mark: Any) -> dict[str, Any]:
        if mark is _ENDED:
            return {**self.head(self.ctx.epoch + 1), "loader_seed": None, "chain": None}
        return {**self.head(), "chain": self._cursors().state_at(mark)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (checked against this pipeline: see :func:`check`). A state of the same epoch
        is restored into the live chain of cursors (a shard being read stays open where that is enough)."""
        check(state, self.head(), "this pipeline")
        ctx = self.ctx.replace(epoch=int(state["epoch"]), loader_seed=state["loader_seed"])
        if ctx != self.ctx or state["chain"] is None:
            self._chain, self._started = None, self._started and ctx == self.ctx
        self.ctx, self._done = ctx, False
        if state["chain"] is not None:
            self._cursors().load_state_dict(state["chain"])


def check(state: Any, head: Mapping[str, Any], what: str) -> None:
    """Refuse a state that does not describe this pipeline here, naming the difference."""
    state = require(state, ("format", "version", "stages", "seed", "epoch", "loader_seed", "placement", "chain"),
                    what)
    if (state["format"], state["version"]) != (FORMAT, VERSION):
        raise ConfigError(f"cannot restore {what}: the state is {state['format']!r} version {state['version']}, "
                          f"not {FORMAT!r} version {VERSION}")
    if list(state["stages"]) != list(head["stages"]):
        raise ConfigError(f"cannot restore {what}: saved state has stages {list(state['stages'])!r}, {what} has "
                          f"{head['stages']!r}; it was saved by another pipeline")
    if state["seed"] != head["seed"]:
        raise ConfigError(f"cannot restore {what}: saved state has seed={state['seed']!r}, {what} has "
                          f"seed={head['seed']!r}")
    if list(state["placement"]) != list(head["placement"]):
        rank, world, worker, workers = state["placement"]
        here = head["placement"]
        raise ConfigError(
            f"cannot restore {what}: the state was saved on rank {rank} of {world}, DataLoader worker {worker} of "
            f"{workers}, and this is rank {here[0]} of {here[1]}, worker {here[2]} of {here[3]}; a streaming "
            "pipeline's position belongs to its rank and worker (shardstream.training resumes on other numbers of "
            "ranks and workers)"
        )
