"""The engine: :func:`build_chain`, the one way a pipeline's stages become an iterator, and
:class:`PipelineIterator`, a chain of cursors with a versioned state.

:func:`build_chain` turns a pipeline's stages into cursors (:mod:`~shardstream.pipeline.cursors`): the shard list
up to the first shard reader is itself a chain, replayed (its items are URLs), the reader and every stage after it
get a cursor of their kind.
:class:`PipelineIterator` adds what the chain's state needs to be meaningful: the pipeline's stages (by name),
its seed, the epoch (and the DataLoader seed used when no epoch was set), and where it runs (rank and worker:
a streaming pipeline's position is per rank and worker, since shards are split between them). The state is a
:mod:`shardstream.resume` envelope of kind ``"pipeline"``: the fingerprint is ``stages``, ``seed`` and
``placement``; the position is ``loader_seed`` and ``chain`` (the cursors' states).

>>> from shardstream.pipeline import DataPipeline, map, shuffle
>>> p = DataPipeline(range(6), shuffle(4), map(lambda x: x * 10))
>>> it = iter(p); _ = next(it); state = it.state_dict()
>>> state["format"], state["kind"], state["fingerprint"]["stages"], state["epoch"]
('shardstream.state', 'pipeline', ['range', 'shuffle', 'map'], 0)
>>> DataPipeline(range(6), shuffle(4)).load_state_dict(state)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
shardstream.errors.StateError: cannot restore this pipeline: saved state has stages ['range', 'shuffle', 'map'], this pipeline has ['range', 'shuffle']...
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..redact import redacting_logger
from ..resume import Progress, check_state, envelope
from ..resume.fields import MAX_REPLAY, SEED_RANGE, field, shown, within
from .adapters import source_cursor
from .bases import Relay
from .context import Context, Source
from .core import Stage
from .cursors import Cursor, PassCursor, ReplayCursor, UnsupportedCursor
from .stages.fused import fuse as fused

if TYPE_CHECKING:  # pragma: no cover
    from .datapipeline import DataPipeline

__all__ = ["PipelineIterator", "build_chain", "check", "describe", "open_source", "stage_names"]

log = redacting_logger(__name__)

KIND = "pipeline"
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


def open_source(source: Any, ctx: Context) -> Iterator[Any]:
    """Iterate a pipeline's first element: a :class:`Source` with ``ctx``, an iterable, or a callable returning one."""
    if isinstance(source, Source):
        return source.iterate(ctx)
    if isinstance(source, Iterable):
        return iter(source)
    if callable(source):
        return iter(source())
    raise ConfigError(f"the first element of a pipeline must be iterable or a callable returning an iterator, "
                      f"not {source!r}")


def describe(cursor: Any) -> str:
    """How a chain of cursors runs, from its source to its end: each cursor's class, and the stages a pass-through
    cursor chains as generators (a fused plan, when one replaces some of them, is logged when it starts).

    >>> from shardstream.pipeline import DataPipeline, map, shuffle
    >>> describe(iter(DataPipeline((1, 2), map(str), shuffle(5))).cursors())
    'IndexCursor -> generators [stage 1 (map)] -> ShuffleCursor (stage 2 (shuffle))'
    """
    parts = []
    while cursor is not None:
        if isinstance(cursor, PassCursor) and type(cursor) is PassCursor:
            parts.append(f"generators [{', '.join(cursor.names)}]")
        else:
            name = getattr(cursor, "name", None)
            parts.append(type(cursor).__name__ + (f" ({name})" if isinstance(name, str) else ""))
        cursor = getattr(cursor, "upstream", None)
    return " -> ".join(reversed(parts))


def _bound(item: Stage, here: Context, upstream: Iterable[Any] | None = None) -> Callable[[Iterable[Any]], Any]:
    """``item`` applied with ``here`` to its input (or, for a restarting stage, to ``upstream``)."""
    return lambda src: item(src if upstream is None else upstream, here)


class _Passes:
    """The stages before a restarting stage that has no cursor of its own: a re-iterable, each pass a new cycle."""

    def __init__(self, stages: list[Any], ctx: Context, last_split: int):
        self.stages, self.ctx, self.last_split, self.passes = stages, ctx, last_split, 0

    def __iter__(self) -> Iterator[Any]:
        ctx = self.ctx.replace(cycle=(*self.ctx.cycle, self.passes))
        self.passes += 1
        return build_chain(self.stages, ctx, self.last_split)


def build_chain(stages: list[Any], ctx: Context, last_split: int) -> Cursor:
    """One cursor per stage (see the module docstring); iterating it is iterating the pipeline. The stages before
    index ``last_split`` (the last splitter) see shared randomness.

    >>> from shardstream.pipeline import shuffle
    >>> sorted(build_chain([range(5), shuffle(3)], Context(), -1))
    [0, 1, 2, 3, 4]
    """
    boundary = next((i for i, s in enumerate(stages) if i and isinstance(s, Stage) and s.spec.reads_shards), None)
    if boundary is None:
        first, here = stages[0], ctx.replace(stage=0, shared=0 < last_split)
        cursor, start = source_cursor(first, lambda: open_source(first, here), here), 1
    else:
        head = stages[:boundary]
        upstream = ReplayCursor(lambda: build_chain(head, ctx, last_split), "the shard list", MAX_REPLAY)
        reader, here = stages[boundary], ctx.replace(stage=boundary, shared=boundary < last_split)
        cursor, start = reader.cursor_over(upstream, here, None, _label(reader, boundary)), boundary + 1
    for i in range(start, len(stages)):
        item, here, name = stages[i], ctx.replace(stage=i, shared=i < last_split), _label(stages[i], i)
        if isinstance(item, Stage):
            kind = item.spec.state
            if item.restarts:
                def restart(cycle: int, i: int = i) -> Cursor:
                    return build_chain(stages[:i], ctx.replace(cycle=(*ctx.cycle, cycle)), last_split)
            else:
                restart = None  # type: ignore[assignment]
            if kind == "pass":
                make = _bound(item, here)
                fuse = type(cursor) is PassCursor
                cursor = cursor.then(make, name, item) if fuse else PassCursor(cursor, make, name, item)  # type: ignore[attr-defined]
                cursor.plan = fused  # field-wise runs ending in batched: one loop
            elif kind is not None:  # a cursor class
                cursor = item.cursor_over(cursor, here, restart, name)
            elif item.restarts:
                passes = _Passes(stages[:i], ctx, last_split)
                cursor = UnsupportedCursor(cursor, _bound(item, here, passes), name)
            else:
                cursor = UnsupportedCursor(cursor, _bound(item, here), name)
        elif hasattr(item, "spec"):
            raise ConfigError(f"pipeline stage {i} is the stage factory {item.__name__!r}, not a stage: "
                              f"call it, e.g. {item.__name__}(...)")
        elif callable(item):
            cursor = UnsupportedCursor(cursor, item, name)
        else:
            raise ConfigError(f"pipeline stage {i} is not callable: {item!r}")
    return cursor


class PipelineIterator(Relay, Cursor):
    """One iteration of a pipeline: its cursors, built on first use, and its state (see the module docstring).
    Once started, ``next()`` is the :data:`~shardstream.pipeline.bases.Relay` base's: the chain's next item, with no
    interpreter frame of its own; :meth:`_step` does the rest (the first item, the end)."""

    def __init__(self, pipeline: DataPipeline, ctx: Context, last_split: int):
        # the pipeline's stages and its class name, not the pipeline: it keeps this iterator (its progress record),
        # and a reference back would make a cycle that keeps open shards and DataLoader workers until the garbage
        # collector runs
        self.stages, self.kind = pipeline.pipeline, type(pipeline).__name__
        self.ctx, self.last_split = ctx, last_split
        self.progress: Progress | None = None  # the pipeline's record of this iteration (set by DataPipeline)
        self._chain: Cursor | None = None
        self._done = self._started = False

    def cursors(self) -> Cursor:
        """The chain of cursors (a finished iteration keeps none: it gets a throwaway one to describe states)."""
        if self._chain is not None:
            return self._chain
        chain = build_chain(list(self.stages), self.ctx, self.last_split)
        if log.isEnabledFor(logging.DEBUG):  # which of the speeds runs: cursors, generators, fused plans (below)
            log.debug("%s epoch %d: %s", self.kind, self.ctx.epoch, describe(chain))
        if not self._done:
            self._chain = chain
        return chain

    @property
    def restorable(self) -> bool:  # type: ignore[override]
        return self.cursors().restorable

    def close(self) -> None:
        """End this iteration now: its open shards are closed (and DataLoaders it reads from released)."""
        chain, self._done, self._chain = self._chain, True, None
        while chain is not None:
            closer = getattr(chain, "_close", None)
            if callable(closer):
                closer()
            chain = getattr(chain, "upstream", None)

    # next(): once started, the chain's next item (at its end: _done is set and the chain dropped), else _step()
    __next__ = Relay.__next__

    def _step(self) -> Any:
        if not self._started:  # the pipeline moves on to the next epoch once this one is being served
            self._started = True
            progress, self.progress = self.progress, None  # started once: no reference back to the record
            if progress is not None:
                progress.start()
        chain = self._chain
        if chain is None:
            if self._done:
                raise StopIteration
            chain = self.cursors()
        try:
            return next(chain)
        except StopIteration:
            self._done, self._chain = True, None  # release shards and DataLoader workers now
            raise

    def fingerprint(self) -> dict[str, Any]:
        """What a state must agree with to be restored here: the stages (by name), the seed, where it runs."""
        ctx = self.ctx
        return {"stages": stage_names(self.stages), "seed": ctx.seed,
                "placement": [ctx.rank, ctx.world_size, ctx.worker, ctx.num_workers]}

    def head(self, epoch: int | None = None) -> dict[str, Any]:
        """The state's envelope for this pipeline and iteration (``chain`` not included)."""
        ctx = self.ctx
        return envelope(KIND, self.fingerprint(), ctx.epoch if epoch is None else epoch, loader_seed=ctx.loader_seed)

    def state_dict(self) -> dict[str, Any]:
        """Where this iteration is; once it is over, the start of the next epoch."""
        return self.state_at(self.mark())

    def mark(self) -> Any:
        """A cheap position (this pipeline under another one: a shuffle buffer keeps one per item)."""
        return _ENDED if self._done else self.cursors().mark()

    def state_at(self, mark: Any) -> dict[str, Any]:
        if mark is _ENDED:
            return {**self.head(self.ctx.epoch + 1), "loader_seed": None, "chain": None}
        return {**self.head(), "chain": self.cursors().state_at(mark)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (checked against this pipeline: see :func:`check`). A state of the same epoch
        is restored into the live chain of cursors (a shard being read stays open where that is enough)."""
        check(state, self.fingerprint(), "this pipeline")
        lo, hi = SEED_RANGE
        loader_seed = field(state, "loader_seed", int, lo=lo, hi=hi, none=True, what="this pipeline")
        chain = field(state, "chain", dict, none=True, what="this pipeline")
        ctx = self.ctx.replace(epoch=int(state["epoch"]), loader_seed=loader_seed)
        if ctx != self.ctx or chain is None:
            self._chain, self._started = None, self._started and ctx == self.ctx
        self.ctx, self._done = ctx, False
        if chain is not None:
            with within("chain"):
                self.cursors().load_state_dict(chain)


def _stages_differ(saved: Any, here: Any, what: str) -> str:
    return (f"saved state has stages {shown(list(saved), 64)}, {what} has {list(here)!r}; it was saved by another "
            "pipeline")


def _placement_differs(saved: Any, here: Any, what: str) -> str:
    if len(saved) != 4:
        return f"saved state has placement={shown(saved)}, {what} has placement={here!r}"
    rank, world, worker, workers = (shown(x) for x in saved)
    return (f"the state's placement: it was saved on rank {rank} of {world}, DataLoader worker {worker} of {workers}, "
            "and this is "
            f"rank {here[0]} of {here[1]}, worker {here[2]} of {here[3]}; a streaming pipeline's position belongs to "
            "its rank and worker (shardstream.training resumes on other numbers of ranks and workers)")


def check(state: Any, fingerprint: Mapping[str, Any], what: str) -> None:
    """Refuse a state that does not describe this pipeline here (see :func:`shardstream.resume.check_state`),
    naming every difference."""
    check_state(state, KIND, fingerprint, what, keys=("loader_seed", "chain"),
                explain={"stages": _stages_differ, "placement": _placement_differs})
