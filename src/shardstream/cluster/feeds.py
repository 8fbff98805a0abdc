"""The trainer's side of one pass of a :class:`~shardstream.cluster.ClusterLoader`: which tasks to submit, when, and
in what order their batches come back.

- :class:`PlanFeed` (a :class:`~shardstream.training.TrainingDataset`): the rank's batches ``skip .. num_batches-1``
  of the epoch plan, in order. A task makes ``per_task`` batches of one slot (``j, j + M, ...`` for ``M`` slots;
  ``M`` is 1 but for ``shuffle="stream"``, whose plan gives each slot its own run of the shards). Every task is a
  pure function of its batch numbers: tasks are submitted ahead, any number of them at once, within the budget.
- :class:`SlotFeed` (a pipeline): ``M`` slots, each the pipeline as DataLoader worker ``k`` of ``M`` would run it;
  each slot's tasks run one after the other (a task starts from the position the previous one ended at), and
  the batches come out round-robin over the slots still running, as torch's DataLoader returns them.

Both keep at most ``in_flight`` batches submitted or held and not yet handed out (a task counts for all its
batches from submission until its last batch is handed out), bring each finished task's result here at once
(:class:`Fetched`: the transport overlaps the trainer's work, and the trainer's memory holds at most
``in_flight`` batches), yield in order whatever the Dask workers do, and
:meth:`cancel` their futures. Each feed keeps its progress in a position record (:class:`PlanPosition`,
:class:`SlotPosition`) that the loader holds instead of the pass: the pass can be dropped (a ``break``), its tasks
cancelled, and the loader still knows exactly where the trainer stopped.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..resume import envelope
from ..training.plan import EpochPlan
from .tasks import plan_batches, slot_batches

__all__ = ["Fetched", "PlanFeed", "PlanPosition", "SlotFeed", "SlotPosition", "Submit"]

#: ``submit(fn, *args, key=, priority=, shards=, near=)`` -> a future of ``(worker address, fn(*args))`` (the
#: loader's, which adds placement and retries; ``near``: the worker that ran the previous task of the same slot)
Submit = Callable[..., Any]

_pool: tuple[int, ThreadPoolExecutor] | None = None


def _fetchers() -> ThreadPoolExecutor:
    """The threads that bring finished results to this process (two: results of two workers travel at once)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(2, thread_name_prefix="shardstream-cluster-fetch"))
    return _pool[1]


class Fetched:
    """A future's result, brought to this process as soon as its task finishes (by a background thread), so that
    the transport of the next batches overlaps the trainer's work on this one; :meth:`get` waits for it and
    re-raises the task's own error (no retry: a data error is final)."""

    __slots__ = ("future", "worker", "_value", "_error", "_ready")

    def __init__(self, future: Any):
        self.future, self._value, self._error = future, None, None  # type: Any, Any, BaseException | None
        self.worker: str | None = None  # the Dask worker that ran the task, once received
        self._ready = threading.Event()
        future.add_done_callback(self._finished)

    def _finished(self, future: Any) -> None:
        try:
            _fetchers().submit(self._fetch)
        except RuntimeError:  # the interpreter is shutting down: nobody waits for it any more
            self._ready.set()

    def _fetch(self) -> None:
        try:
            self.worker, self._value = self.future.result()  # a result lost with its worker is computed again
        except BaseException as e:  # noqa: BLE001 - handed to the trainer by get()
            self._error = e
        finally:
            self._ready.set()

    def get(self) -> Any:
        self._ready.wait()
        self.future = None  # the scheduler forgets the task once nobody holds its future
        if self._error is not None:
            raise self._error
        value, self._value = self._value, None
        return value


class _Task:
    """A submitted task: its result on the way, then the batches, kept until handed out; ``shards``: those it
    reads, when known."""

    __slots__ = ("fetched", "batches", "size", "left", "shards")

    def __init__(self, future: Any, size: int, shards: list[int] | None):
        self.fetched, self.batches, self.size, self.left, self.shards = Fetched(future), None, size, size, shards

    @property
    def future(self) -> Any:
        return self.fetched.future

    def take(self, index: int, ran: Callable[[list[int] | None, str | None], None]) -> Any:
        if self.batches is None:
            self.batches = self.fetched.get()
            ran(self.shards, self.fetched.worker)
        batch, self.batches[index] = self.batches[index], None  # type: ignore[index]
        self.left -= 1
        return batch


def _nowhere(shards: list[int] | None, worker: str | None) -> None:
    """The default ``ran`` callback: nobody records where tasks ran."""


class _Feed:
    """What both feeds share: the pass's futures, the budget, the end. ``ran(shards, worker)`` is told where each
    task ran once its result is received (``shards``: those it read, when known)."""

    def __init__(self, submit: Submit, in_flight: int, per_task: int, convert: Callable[[Any], Any],
                 ran: Callable[[list[int] | None, str | None], None] | None):
        self.submit, self.in_flight, self.per_task, self.convert = submit, in_flight, per_task, convert
        self.ran = ran or _nowhere
        self.pass_id = uuid.uuid4().hex[:12]  # keys unique on a scheduler shared by many trainers
        self.finished = False  # this feed hands out nothing more (its end, or cancelled)

    @property
    def held(self) -> int:  # pragma: no cover - abstract
        """Batches submitted or held, not yet handed out."""
        raise NotImplementedError

    def futures(self) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def cancel(self) -> None:
        """Cancel every task of this pass still wanted (the batches already received are dropped too); the
        position record is left as it is: it says what was handed out."""
        futures = self.futures()
        self.finished = True
        self._drop()
        if futures:
            futures[0].client.cancel(futures)

    def cancel_soon(self) -> None:
        """:meth:`cancel` on a background thread (for a pass being garbage-collected: that may happen on any
        thread, Dask's own included, where a blocking call to the scheduler must not be made)."""
        try:
            _fetchers().submit(self.cancel)
        except RuntimeError:  # the interpreter is shutting down: the client is going too
            pass

    def _drop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __iter__(self) -> _Feed:
        return self


class PlanPosition:
    """Where a :class:`PlanFeed`'s pass is: its epoch, plan and rank, the batches handed out (``consumed``, from
    ``plan.skip``) and whether the pass ran to its end. The loader keeps this, not the pass."""

    __slots__ = ("epoch", "plan", "rank", "consumed", "finished")

    def __init__(self, epoch: int, plan: EpochPlan, rank: int):
        self.epoch, self.plan, self.rank, self.consumed, self.finished = epoch, plan, rank, plan.skip, False

    @property
    def done(self) -> bool:
        """Every batch of the rank's epoch was handed out (or the pass ended)."""
        return self.finished or self.consumed >= self.plan.num_batches


class PlanFeed(_Feed):
    """A rank's batches of ``position.plan`` (see the module docstring); ``slots`` is ``M``."""

    def __init__(self, submit: Submit, recipe: Any, position: PlanPosition, *, in_flight: int, per_task: int,
                 slots: int, convert: Callable[[Any], Any], shards: Callable[[int, list[int]], Any],
                 ran: Callable[[list[int] | None, str | None], None] | None = None):
        super().__init__(submit, in_flight, per_task, convert, ran)
        self.recipe, self.position, self.slots = recipe, position, slots
        self.epoch, self.plan, self.rank = position.epoch, position.plan, position.rank
        self._shards = shards
        self._tasks: dict[int, _Task] = {}  # task number -> task
        self._next_task = 0  # the next task number to submit
        self._held = 0

    # batch b is position t of task T: rounds of M tasks x per_task batches, task k of a round is slot k's
    def _where(self, batch: int) -> tuple[int, int]:
        rel, m, n = batch - self.plan.skip, self.slots, self.per_task
        rnd, rest = divmod(rel, m * n)
        return rnd * m + rest % m, rest // m

    def _batches_of(self, task: int) -> list[int]:
        m, n = self.slots, self.per_task
        rnd, slot = divmod(task, m)
        first = self.plan.skip + rnd * m * n + slot
        return list(range(first, min(first + m * n, self.plan.num_batches), m))

    @property
    def held(self) -> int:
        return self._held

    def _submit_next(self) -> bool:
        batches = self._batches_of(self._next_task)
        if not batches:
            return False
        number = self._next_task
        key = f"shardstream-batches-{self.pass_id}-{self.epoch}-{self.rank}-{batches[0]}"
        shards = self._shards(self.epoch, batches)
        future = self.submit(plan_batches, self.recipe, self.epoch, self.plan, self.rank, batches[0], len(batches),
                             key=key, priority=-batches[0], shards=shards)
        self._tasks[number] = _Task(future, len(batches), shards)
        self._held += len(batches)
        self._next_task += 1
        return True

    def _fill(self, needed: int) -> None:
        """Submit up to task ``needed`` (what the next batch needs), then ahead while the budget allows."""
        while self._next_task <= needed and self._submit_next():
            pass
        while self._held + len(self._batches_of(self._next_task)) <= self.in_flight and self._submit_next():
            pass

    def start(self) -> PlanFeed:
        """Submit the first tasks now (the cluster starts while the trainer gets ready)."""
        if not self.position.done:
            self._fill(self._where(self.position.consumed)[0])
        return self

    def __next__(self) -> Any:
        position = self.position
        if self.finished or position.done:
            if not self.finished:
                position.finished = self.finished = True
            raise StopIteration
        number, index = self._where(position.consumed)
        self._fill(number)
        task = self._tasks[number]
        batch = task.take(index, self.ran)
        self._held -= 1
        if not task.left:
            del self._tasks[number]
        position.consumed += 1
        self._fill(number)
        return self.convert(batch)

    def futures(self) -> list[Any]:
        return [t.future for t in self._tasks.values() if t.future is not None]

    def _drop(self) -> None:
        self._tasks.clear()
        self._held = 0


class SlotPosition:
    """Where a :class:`SlotFeed`'s pass is: each slot's pipeline state after the batches handed out (None: not
    started), which slots ended, whose turn it is. The loader keeps this, not the pass."""

    __slots__ = ("fingerprint", "epoch", "states", "ended", "turn")

    def __init__(self, fingerprint: dict[str, Any], epoch: int, slots: int, saved: dict[str, Any] | None = None):
        self.fingerprint, self.epoch = fingerprint, epoch
        self.states: list[dict[str, Any] | None] = list(saved["slots"]) if saved else [None] * slots
        self.ended: list[bool] = list(saved["ended"]) if saved else [False] * slots
        self.turn: int = saved["turn"] if saved else 0

    def state_dict(self) -> dict[str, Any]:
        """The pipeline state: the slots' positions, which ended, whose turn; once all ended, the next epoch's
        start."""
        count = len(self.states)
        if all(self.ended):
            return envelope("pipeline", self.fingerprint, self.epoch + 1, slots=[None] * count, turn=0,
                            ended=[False] * count)
        return envelope("pipeline", self.fingerprint, self.epoch, slots=list(self.states), turn=self.turn,
                        ended=list(self.ended))


class _Slot:
    """One slot of a :class:`SlotFeed`: its received batches (and the states after them), its submitted task,
    whether its last task ended it, the worker that ran its last task."""

    __slots__ = ("number", "batches", "states", "done", "future", "size", "worker")

    def __init__(self, number: int, ended: bool):
        self.number = number
        self.batches: collections.deque[Any] = collections.deque()
        self.states: collections.deque[dict[str, Any]] = collections.deque()
        self.done = ended  # the received batches are the slot's last ones
        self.future: Any = None
        self.size = 0  # batches the submitted task may make
        self.worker: str | None = None

    @property
    def held(self) -> int:
        return len(self.batches) + self.size


class SlotFeed(_Feed):
    """A pipeline's batches from its slots (see the module docstring), from where ``position`` says. A slot's
    next task is asked to run where its previous one ran (``near``): its shard cache holds the shard the slot is
    reading."""

    def __init__(self, submit: Submit, recipe: Any, position: SlotPosition, rank: int, world_size: int, *,
                 in_flight: int, per_task: int, convert: Callable[[Any], Any],
                 ran: Callable[[list[int] | None, str | None], None] | None = None):
        super().__init__(submit, in_flight, per_task, convert, ran)
        self.recipe, self.position, self.rank, self.world_size = recipe, position, rank, world_size
        self.epoch = position.epoch
        self.slots = [_Slot(k, position.ended[k]) for k in range(len(position.states))]
        self._count = itertools.count()

    @property
    def held(self) -> int:
        return sum(slot.held for slot in self.slots)

    def _next_state(self, slot: _Slot) -> dict[str, Any] | None:
        """Where the slot's next task starts: after its last batch received, else where the trainer is."""
        return slot.states[-1] if slot.states else self.position.states[slot.number]

    def _submit(self, slot: _Slot) -> None:
        key = f"shardstream-slot-{self.pass_id}-{self.epoch}-{self.rank}-{slot.number}-{next(self._count)}"
        slot.future = Fetched(self.submit(slot_batches, self.recipe, self.epoch, self.rank, self.world_size,
                                          slot.number, len(self.slots), self._next_state(slot), self.per_task,
                                          key=key, priority=0, shards=None, near=slot.worker))
        slot.size = self.per_task

    def _receive(self, slot: _Slot) -> None:
        batches, states, ended = slot.future.get()  # re-raises the task's own error
        slot.worker = slot.future.worker
        self.ran(None, slot.worker)
        slot.future, slot.size = None, 0
        slot.batches.extend(batches)
        slot.states.extend(states)
        slot.done = ended
        if not ended and self.held + self.per_task <= self.in_flight:  # the slot's next task, from where it ends
            self._submit(slot)

    def _top_up(self) -> None:
        """Submit the next task of the slots that have none, in turn order, while the budget allows."""
        count = len(self.slots)
        for k in range(count):
            slot = self.slots[(self.position.turn + k) % count]
            if slot.future is None and not slot.done and self.held + self.per_task <= self.in_flight:
                self._submit(slot)

    def start(self) -> SlotFeed:
        """Submit each running slot's first task, in turn order, within the budget."""
        turn = self.position.turn
        for slot in self.slots[turn:] + self.slots[:turn]:
            if not self.position.ended[slot.number] and (self.held + self.per_task <= self.in_flight
                                                         or not self.held):
                self._submit(slot)
        return self

    def __next__(self) -> Any:
        position, count = self.position, len(self.slots)
        while not self.finished:
            if all(position.ended):
                self.finished = True
                break
            slot = self.slots[position.turn]
            if position.ended[slot.number]:
                position.turn = (position.turn + 1) % count
                continue
            if not slot.batches:
                if slot.done:
                    position.ended[slot.number] = True
                    continue
                if slot.future is None:
                    self._submit(slot)
                self._receive(slot)
                continue
            batch = slot.batches.popleft()
            position.states[slot.number] = slot.states.popleft()
            if slot.done and not slot.batches:  # that was the slot's last batch
                position.ended[slot.number] = True
            position.turn = (position.turn + 1) % count
            self._top_up()
            return self.convert(batch)
        raise StopIteration

    def futures(self) -> list[Any]:
        return [s.future.future for s in self.slots if s.future is not None and s.future.future is not None]

    def _drop(self) -> None:
        for slot in self.slots:
            slot.batches.clear()
            slot.future, slot.size = None, 0
