"""What a Dask worker runs for a :class:`~shardstream.cluster.ClusterLoader`: pure functions of their arguments.

- :func:`plan_batches` makes batches of a :class:`~shardstream.training.TrainingDataset`'s epoch plan: batch ``j``
  of rank ``r`` is a function of ``(dataset, epoch, plan, r, j)`` only, so any worker, or two of them after a
  worker died, make the same batch.
- :func:`slot_batches` runs a pipeline (``WebDataset``, ``DataPipeline``) as DataLoader worker ``slot`` of
  ``slots`` would, from a saved position of that slot, for a few batches, and hands back the batches and the
  position after each (the pipeline's own ``state_dict()``): the next task of the slot starts from the last one.

A pipeline run in slots must save its position (every stage declared, see :func:`shardstream.pipeline.stage`):
a stage that cannot makes the task raise :class:`~shardstream.errors.StateError` naming it. Nothing here keeps
state between calls; the trainer holds every position. A task that fails for a data reason
raises (after the pipeline's own handlers had their say): the loader re-raises it in the trainer, and never
asks Dask to retry it.

>>> from shardstream.pipeline import DataPipeline, map
>>> pipe = DataPipeline(range(10), map(lambda x: x * 10))  # stages that save their position
>>> batches, states, ended = slot_batches(pipe, 0, 0, 1, 0, 1, None, 3)
>>> batches, ended
([0, 10, 20], False)
>>> slot_batches(pipe, 0, 0, 1, 0, 1, states[-1], 20)[0]
[30, 40, 50, 60, 70, 80, 90]
"""

from __future__ import annotations

from typing import Any

from ..pipeline.context import Context
from ..pipeline.core import Stage
from ..pipeline.iteration import PipelineIterator
from ..runtime import Placement
from ..training.iterators import PlanIterator
from ..training.plan import EpochPlan

__all__ = ["keep", "located", "plan_batches", "slot_batches", "worker_address"]


def keep(recipe: Any) -> Any:
    """The recipe itself: submitted once per loader, so that every task shares one copy per Dask worker (and
    Dask can compute it again on another worker if the one holding it dies: its value is in the task)."""
    return recipe


def worker_address() -> str | None:
    """The address of the Dask worker running this call, or None outside a Dask worker.

    >>> worker_address() is None
    True
    """
    try:
        from distributed import get_worker  # noqa: PLC0415 - optional: shardstream[dask]
    except ImportError:  # pragma: no cover - a Dask worker has distributed
        return None
    try:
        return str(get_worker().address)
    except ValueError:
        return None


def located(fn: Any, *args: Any) -> tuple[str | None, Any]:
    """``(the worker that ran it, fn(*args))``: what every task of a loader returns, so that the trainer learns
    where each task read its shards (whose shard cache holds them now).

    >>> located(max, 2, 3)
    (None, 3)
    """
    return worker_address(), fn(*args)


def plan_batches(dataset: Any, epoch: int, plan: EpochPlan, rank: int, first: int, count: int) -> list[Any]:
    """Batches ``first, first + W, ...`` (``count`` of them; ``W`` is the plan's ``num_workers``) of rank ``rank``
    in epoch ``epoch`` of ``dataset``'s ``plan``, made as the DataLoader worker that owns them would make them."""
    workers = plan.num_workers if plan.contiguous else 1
    iterator = PlanIterator(dataset, epoch, plan, rank, first % workers, workers, first)
    try:
        return [next(iterator) for _ in range(count)]
    finally:
        iterator.close()


def last_split(pipeline: Any) -> int:
    """Where the pipeline's last splitting stage is (what its iterator needs to know)."""
    return max((i for i, s in enumerate(pipeline.pipeline) if isinstance(s, Stage) and s.splits), default=-1)


def slot_iterator(pipeline: Any, epoch: int, rank: int, world_size: int, slot: int, slots: int) -> PipelineIterator:
    """An iterator of ``pipeline`` placed as DataLoader worker ``slot`` of ``slots`` on rank ``rank`` of
    ``world_size``, serving epoch ``epoch`` (wherever it runs: the placement is given, not read)."""
    seed = 0 if pipeline.seed is None else pipeline.seed
    ctx = Context(seed=seed, epoch=int(epoch), placement=Placement(rank, world_size, slot, slots))
    return PipelineIterator(pipeline, ctx, last_split(pipeline))


def slot_batches(pipeline: Any, epoch: int, rank: int, world_size: int, slot: int, slots: int,
                 state: dict[str, Any] | None, count: int) -> tuple[list[Any], list[dict[str, Any]], bool]:
    """Up to ``count`` items of slot ``slot``'s iterator, continued from ``state`` (None: the start of the epoch):
    ``(items, the state after each item, whether the slot's iteration ended)``."""
    iterator = slot_iterator(pipeline, epoch, rank, world_size, slot, slots)
    if state is not None:
        iterator.load_state_dict(state)
    items: list[Any] = []
    states: list[dict[str, Any]] = []
    try:
        for _ in range(count):
            try:
                items.append(next(iterator))
            except StopIteration:
                return items, states, True
            states.append(iterator.state_dict())
        return items, states, False
    finally:
        iterator.close()
