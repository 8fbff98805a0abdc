"""ClusterLoader: a training loop's batches made on a Dask cluster, with the semantics of local training.

The trainer passes the recipe it would give :class:`~shardstream.training.TrainingLoader` (a
:class:`~shardstream.training.TrainingDataset`) or a DataLoader (a fluid ``WebDataset`` / ``DataPipeline`` that
batches), and a ``distributed.Client`` or a scheduler address. Dask workers read the shards, decode, augment and
collate; the trainer iterates ready batches.

- **Order**: a batch is a pure function of ``(recipe, seed, epoch, rank, world_size, batch number)`` (a
  pipeline's: of the slot's saved position), so the batches and their order never depend on the number of Dask
  workers or on which worker ran what. A ``TrainingDataset`` gives exactly ``TrainingLoader``'s batches; a
  pipeline with ``slots=M`` gives a DataLoader's with ``num_workers=M``.
- **State**: ``state_dict()`` / ``load_state_dict()``. For a ``TrainingDataset`` the state is
  ``TrainingLoader``'s (a ``"training"`` state: the plan and the batches consumed), so a checkpoint restores into
  either loader, with other numbers of ranks too; for a pipeline it is each slot's pipeline state and whose turn
  it is. Neither mentions the cluster: a state restores on a cluster of any size.
- **Backpressure**: at most ``in_flight`` batches submitted or received and not yet handed out.
- **Placement**: each task is asked to run on a Dask worker whose shard cache holds its shards
  (:mod:`~shardstream.cluster.placement`), loosely: a busy or dead worker never blocks it.
- **Dropped passes**: the loader keeps its latest pass's position, not the pass: a pass dropped mid-epoch (a
  ``break``) is garbage-collected, its tasks are cancelled, and ``state_dict()`` still says where it stopped.
- **Failures**: a Dask worker that dies loses its results; the tasks are pure, so Dask computes them again
  elsewhere. A task that raises (a data error the pipeline's handler let through) is not retried: the error is
  raised here, in the trainer, at the batch it belongs to.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError, MissingDependencyError, StateError
from ..pipeline.datapipeline import DataPipeline
from ..pipeline.iteration import stage_names
from ..resume import Resumable, check_state as check_envelope, envelope
from ..resume.fields import MAX_WORKERS, field, refuse
from ..runtime import Placement
from ..training import TrainingDataset
from ..training.plan import EpochPlan
from ..training.state import check_state
from .feeds import PlanFeed, PlanPosition, SlotFeed, SlotPosition
from .placement import recipe_cache, task_shards
from .tasks import keep, located

__all__ = ["ClusterLoader"]

#: ``collate_fn``'s default: torch's conversion of numpy arrays into tensors where torch is installed
TORCH_CONVERT = "torch"


def _converter(collate_fn: Any) -> Callable[[Any], Any]:
    if collate_fn is None:
        return lambda batch: batch
    if collate_fn != TORCH_CONVERT:
        return collate_fn
    try:
        from torch.utils.data import default_convert  # noqa: PLC0415 - optional: shardstream[torch]
    except ImportError:
        return lambda batch: batch
    return default_convert


def _client(client: Any) -> tuple[Any, bool]:
    """``(client, owned)``: the client given, one connected to the address given, or Dask's current one."""
    try:
        import distributed  # noqa: PLC0415 - optional: shardstream[dask]
    except ImportError:
        raise MissingDependencyError("ClusterLoader", "dask", "distributed") from None
    if isinstance(client, str):
        return distributed.Client(client), True
    if client is None:
        try:
            return distributed.get_client(), False
        except ValueError as e:
            raise ConfigError("ClusterLoader needs a Dask cluster: pass a distributed.Client or a scheduler address "
                              "(ClusterLoader(dataset, 'tcp://10.0.0.1:8786'))") from e
    return client, False


class _Record:
    """The loader's record of its latest pass: where the pass is (its feed's position record), kept by the loader
    (its :class:`~shardstream.resume.Progress`) instead of the pass, so that a pass dropped mid-epoch (a ``break``)
    can be garbage-collected, its tasks cancelled, and ``state_dict()`` still says exactly where it stopped."""

    __slots__ = ("loader", "position")

    def __init__(self, loader: ClusterLoader, position: PlanPosition | SlotPosition):
        self.loader, self.position = loader, position

    def state_dict(self) -> dict[str, Any]:
        position = self.position
        if isinstance(position, SlotPosition):
            return position.state_dict()
        if position.done:
            return self.loader._initial_state()
        return self.loader.dataset.state_for(position.epoch, position.plan, position.consumed, rank=position.rank)


class _Pass:
    """One iteration of the loader: its feed. Dropping it (a ``break``, the end of a ``for`` loop) cancels the
    tasks it still has on the cluster; the loader keeps only its position (a :class:`_Record`)."""

    def __init__(self, feed: PlanFeed | SlotFeed, record: _Record):
        self.feed, self.record = feed, record

    def __iter__(self) -> _Pass:
        return self

    def __next__(self) -> Any:
        return next(self.feed)

    @property
    def in_flight(self) -> int:
        """Batches submitted or received and not yet handed out (at most the loader's ``in_flight``)."""
        return self.feed.held

    def state_dict(self) -> dict[str, Any]:
        """Where this pass is (the batches handed out)."""
        return self.record.state_dict()

    def close(self) -> None:
        """Cancel this pass's tasks."""
        self.feed.cancel()


class ClusterLoader(Resumable):
    """Batches of ``dataset`` made on a Dask cluster (see the module docstring).

    :param dataset: a :class:`~shardstream.training.TrainingDataset`, or a ``WebDataset`` / ``DataPipeline`` whose
        items are batches (``.batched(n)``)
    :param client: a ``distributed.Client``, a scheduler address (``"tcp://10.0.0.1:8786"``: the loader connects
        and closes its connection on :meth:`close`), or None: Dask's current client
    :param in_flight: batches submitted or received and not yet handed out, at most (the trainer's memory holds
        at most that many batches, plus the one it is using); at least ``batches_per_task * slots``; default:
        twice that, and at least 8
    :param batches_per_task: batches one Dask task makes (more: less overhead per batch, coarser backpressure)
    :param slots: a pipeline: the DataLoader workers it is split between (its ``split_by_worker``; default 8);
        a ``TrainingDataset`` with ``shuffle="stream"``: the plan's workers (default 1); others: 1, the only value
    :param collate_fn: applied here to each batch received (default: torch's ``default_convert``, numpy arrays to
        tensors, where torch is installed; None: the batches as made)
    :param prefer: ``prefer(shards) -> worker addresses or None``: where a task should run (it may run elsewhere
        when those workers are busy or gone); ``shards`` are the numbers (in the dataset's shard list) of the
        shards the task reads, when known (a ``TrainingDataset``). Default: where the workers' shard caches hold
        them (see :mod:`shardstream.cluster.placement`)
    :param workers: run every task on these Dask workers only (addresses or names: a share of a cluster that
        other jobs use too); None: any worker
    :param rank, world_size: a pipeline's placement (default: ``torch.distributed``, else ``RANK``/``WORLD_SIZE``);
        a ``TrainingDataset`` has its own
    """

    #: the batches a pass handed out are consumed, whatever epoch the loader is told to serve next
    _epoch_forgets_progress = False

    def __init__(self, dataset: Any, client: Any = None, *, in_flight: int | None = None, batches_per_task: int = 2,
                 slots: int | None = None, collate_fn: Any = TORCH_CONVERT,
                 prefer: Callable[[list[int]], Sequence[str] | None] | None = None,
                 workers: Sequence[str] | None = None, rank: int | None = None, world_size: int | None = None):
        if not isinstance(dataset, (TrainingDataset, DataPipeline)):
            raise ConfigError(f"ClusterLoader needs a TrainingDataset or a WebDataset/DataPipeline, not "
                              f"{type(dataset).__name__}")
        self.training = isinstance(dataset, TrainingDataset)
        default_slots = 8 if not self.training else 1
        if isinstance(dataset, TrainingDataset) and not dataset.stream and slots not in (None, 1):
            raise ConfigError(f"slots={slots}: a TrainingDataset with shuffle={dataset.shuffle!r} makes the same "
                              "batches whatever the workers; slots applies to shuffle='stream' and to pipelines")
        self.slots = default_slots if slots is None else int(slots)
        if in_flight is None and isinstance(batches_per_task, int):
            in_flight = max(8, 2 * batches_per_task * self.slots)
        for name, value in (("in_flight", in_flight), ("batches_per_task", batches_per_task), ("slots", self.slots)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"ClusterLoader: {name} must be an integer >= 1, got {value!r}")
        if self.slots > MAX_WORKERS:
            raise ConfigError(f"ClusterLoader: slots must be at most {MAX_WORKERS}, got {self.slots}")
        if in_flight < batches_per_task * self.slots:
            raise ConfigError(f"ClusterLoader: in_flight={in_flight} cannot hold one task per slot "
                              f"(batches_per_task={batches_per_task} x slots={self.slots}); raise in_flight")
        if (rank is None) != (world_size is None) or (world_size is not None and not 0 <= rank < world_size):  # type: ignore[operator]
            raise ConfigError(f"give both rank and world_size, with 0 <= rank < world_size (got {rank}, {world_size})")
        self.dataset: Any = dataset
        self.in_flight, self.batches_per_task = in_flight, batches_per_task
        if prefer is not None and workers is not None:
            raise ConfigError("ClusterLoader: give prefer= (where tasks should run) or workers= (where they must run), "
                              "not both")
        self.prefer, self._convert = prefer, _converter(collate_fn)
        self.workers = None if workers is None else list(workers)
        self._placement = None if rank is None else (int(rank), int(world_size))  # type: ignore[arg-type]
        self.client, self._owns_client = _client(client)
        self._recipe: Any = None  # the dataset's future on the cluster (one copy per Dask worker)
        self._pass: weakref.ref[_Pass] | None = None  # the latest pass, held weakly (the trainer holds it)
        self._live: weakref.finalize | None = None  # cancels the latest pass's tasks when it is dropped
        self._epoch = dataset.epoch
        #: which workers' shard caches hold which shards (a recipe whose workers cache them, placed by them)
        self._holders = recipe_cache(dataset) if self.training and prefer is None and workers is None else None
        self._placements: list[tuple[list[int] | None, str | None]] = []

    # -- placement --------------------------------------------------------------------------------------------
    def rank_and_world(self) -> tuple[int, int]:
        """This trainer's ``(rank, world_size)``."""
        if self.training:
            return self.dataset.rank_and_world()
        if self._placement is not None:
            return self._placement
        here = Placement.current()
        return here.rank, here.world_size

    def _where(self, shards: list[int] | None, near: str | None) -> Sequence[str] | None:
        """Where a task should run: ``prefer``'s answer, else the workers whose cache holds its shards, else
        where its slot's previous task ran; None: anywhere."""
        if self.prefer is not None:
            return self.prefer(shards) if shards is not None else None
        if self._holders is not None:
            return self._holders.best(shards)
        return [near] if near is not None else None

    def _submit(self, fn: Callable[..., Any], *args: Any, key: str, priority: int, shards: list[int] | None,
                near: str | None = None) -> Any:
        if self.workers is not None:
            extra: dict[str, Any] = {"workers": self.workers}
        else:
            wanted = self._where(shards, near)
            extra = {"workers": list(wanted), "allow_other_workers": True} if wanted else {}
        return self.client.submit(located, fn, *args, key=key, priority=priority, retries=0, pure=False, **extra)

    def _shards(self, epoch: int, batches: list[int], plan: EpochPlan, rank: int) -> list[int] | None:
        """The shards the batches read (asked when something places tasks by them)."""
        if self.prefer is None and self._holders is None:
            return None
        return task_shards(self.dataset, epoch, plan, rank, batches)

    def _ran(self, shards: list[int] | None, worker: str | None) -> None:
        """A task's result was received: it ran on ``worker`` and read ``shards`` (None: not known)."""
        self._placements.append((shards, worker))
        if self._holders is not None:
            self._holders.ran(shards, worker)

    @property
    def placements(self) -> list[tuple[list[int] | None, str | None]]:
        """Where the latest pass's tasks ran, in the order their results were received: ``(the shards the task
        read, when known, the Dask worker's address)``."""
        return list(self._placements)

    # -- iteration --------------------------------------------------------------------------------------------
    def _plan(self, pending: dict[str, Any] | None) -> EpochPlan:
        rank, world = self.rank_and_world()
        if pending is not None:
            return self.dataset.resume_point(pending, rank=rank, world_size=world, num_workers=self.slots)[1]
        return self.dataset.plan(world_size=world, num_workers=self.slots)

    def _drop_pass(self) -> None:
        """Cancel the latest pass's tasks now (not wanted any more), if it has not been dropped already."""
        if self._live is not None:
            dropped = self._live.detach()
            if dropped is not None:
                dropped[2][0].cancel()
            self._live = self._pass = None

    def __iter__(self) -> _Pass:
        self._drop_pass()  # the previous pass's tasks are not wanted any more
        epoch, pending = self._epoch, self._take_pending()
        if self._recipe is None:
            self._recipe = self.client.submit(keep, self.dataset, key=f"shardstream-recipe-{uuid.uuid4().hex}",
                                              pure=False, retries=0, workers=self.workers)
        rank, world = self.rank_and_world()
        self._placements = []
        if self._holders is not None:
            self._holders.refresh(self.client)  # once per pass: the workers' caches now
        feed: PlanFeed | SlotFeed
        position: PlanPosition | SlotPosition
        if self.training:
            plan = self._plan(pending)
            position = PlanPosition(epoch, plan, rank)
            feed = PlanFeed(self._submit, self._recipe, position, in_flight=self.in_flight,
                            per_task=self.batches_per_task, slots=self.slots if self.dataset.stream else 1,
                            convert=self._convert, shards=lambda e, b: self._shards(e, b, plan, rank), ran=self._ran)
        else:
            position = SlotPosition(self._fingerprint(), epoch, self.slots, pending)
            feed = SlotFeed(self._submit, self._recipe, position, rank, world, in_flight=self.in_flight,
                            per_task=self.batches_per_task, convert=self._convert, ran=self._ran)
        record = _Record(self, position)
        current = _Pass(feed, record)
        self._pass = weakref.ref(current)
        self._live = weakref.finalize(current, type(feed).cancel_soon, feed)  # a pass dropped: its tasks are cancelled
        self._live.atexit = False
        self._begin(epoch, record).start()  # the next iter() serves the next epoch, from now on
        feed.start()
        return current

    def __len__(self) -> int:
        """Batches the next ``iter()`` yields (a ``TrainingDataset``; a pipeline has no length here)."""
        if not self.training:
            raise TypeError("a ClusterLoader over a pipeline has no length (its slots end when their shards do)")
        return self._plan(self._pending).remaining_batches

    @property
    def in_flight_batches(self) -> int:
        """Batches of the current pass submitted or received and not yet handed out."""
        current = None if self._pass is None else self._pass()
        return 0 if current is None else current.in_flight

    def close(self) -> None:
        """Cancel every task of this loader (a trainer that stops early leaves nothing running on the cluster)
        and close the connection the loader opened (a client given to it stays open)."""
        self._drop_pass()
        if self._recipe is not None:
            self.client.cancel([self._recipe])
            self._recipe = None
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> ClusterLoader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- states -----------------------------------------------------------------------------------------------
    def _fingerprint(self) -> dict[str, Any]:
        """A pipeline state's fingerprint: the stages, the seed, the trainer's placement, the slots."""
        rank, world = self.rank_and_world()
        pipeline = self.dataset
        return {"stages": stage_names(pipeline.pipeline), "seed": 0 if pipeline.seed is None else pipeline.seed,
                "placement": [rank, world], "slots": self.slots}

    def _initial_state(self) -> dict[str, Any]:
        if self.training:
            rank, world = self.rank_and_world()
            return self.dataset.start_state(self._epoch, rank=rank, world_size=world)
        return envelope("pipeline", self._fingerprint(), self._epoch, slots=[None] * self.slots, turn=0,
                        ended=[False] * self.slots)

    def _check_state(self, state: Any) -> None:
        what = "this loader"
        if self.training:
            check_state(state, self.dataset.fingerprint, what)
            if "batches" not in state:
                raise StateError("this state was saved inside one DataLoader worker; restore a ClusterLoader from "
                                 "ClusterLoader.state_dict() or TrainingLoader.state_dict()")
            self._plan(state)  # every field checked now
            return
        self._check_slots(state)
        check_envelope(state, "pipeline", self._fingerprint(), what, keys=("slots", "turn", "ended"))
        slots = field(state, "slots", list, length=self.slots, what=what)
        ended = field(state, "ended", list, length=self.slots, what=what)
        field(state, "turn", int, lo=0, hi=self.slots - 1, what=what)
        for k in range(self.slots):
            if not isinstance(ended[k], bool):
                raise refuse(what, f"ended/{k}", "must be true or false")
            if slots[k] is not None and not isinstance(slots[k], dict):
                raise refuse(what, f"slots/{k}", "must be a pipeline state (a dict) or null")

    def _check_slots(self, state: Any) -> None:
        """A pipeline state restores only with the slots it was saved with: say so, and how, before anything else."""
        saved = state.get("fingerprint") if isinstance(state, dict) else None
        slots = saved.get("slots") if isinstance(saved, dict) else None
        if isinstance(slots, int) and not isinstance(slots, bool) and slots != self.slots:
            raise StateError(f"cannot restore this loader: the pipeline state was saved with slots={slots}, this "
                             f"loader has slots={self.slots}; each slot keeps its own position in the pipeline, so "
                             f"the state resumes only with the same slots: ClusterLoader(..., slots={slots}) (on any "
                             "number of Dask workers), or start the epoch afresh without the state")

    def __repr__(self) -> str:
        return (f"ClusterLoader({self.dataset!r}, in_flight={self.in_flight}, slots={self.slots}, "
                f"epoch={self._epoch})")
