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
:meth:`cancel` their futures (Dask forgets tasks nobody wants: a dropped pass leaves nothing running either).
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

__all__ = ["Fetched", "PlanFeed", "SlotFeed", "Submit"]

#: ``submit(fn, *args, key=, priority=, shards=)`` -> a future (the loader's, which adds placement and retries)
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

    __slots__ = ("future", "_value", "_error", "_ready")

    def __init__(self, future: Any):
        self.future, self._value, self._error = future, None, None  # type: Any, Any, BaseException | None
        self._ready = threading.Event()
        future.add_done_callback(self._finished)

    def _finished(self, future: Any) -> None:
        try:
            _fetchers().submit(self._fetch)
        except RuntimeError:  # the interpreter is shutting down: nobody waits for it any more
            self._ready.set()

    def _fetch(self) -> None:
        try:
            self._value = self.future.result()  # waits on: a result lost with its worker is computed again
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
    """A submitted task: its result on the way, then the batches, kept until handed out."""

    __slots__ = ("fetched", "batches", "size", "left")

    def __init__(self, future: Any, size: int):
        self.fetched, self.batches, self.size, self.left = Fetched(future), None, size, size

    @property
    def future(self) -> Any:
        return self.fetched.future

    def take(self, index: int) -> Any:
        if self.batches is None:
            self.batches = self.fetched.get()
        batch, self.batches[index] = self.batches[index], None  # type: ignore[index]
        self.left -= 1
        return batch


class _Feed:
    """What both feeds share: the pass's futures, the budget, the end."""

    def __init__(self, submit: Submit, in_flight: int, per_task: int, convert: Callable[[Any], Any]):
        self.submit, self.in_flight, self.per_task, self.convert = submit, in_flight, per_task, convert
        self.pass_id = uuid.uuid4().hex[:12]  # keys unique on a scheduler shared by many trainers
        self.finished = False

    @property
    def held(self) -> int:  # pragma: no cover - abstract
        """Batches submitted or held, not yet handed out."""
        raise NotImplementedError

    def futures(self) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def cancel(self) -> None:
        """Cancel every task of this pass still wanted (the batches already received are dropped too)."""
        futures = self.futures()
        self.finished = True
        if futures:
            futures[0].client.cancel(futures)
        self._drop()

    def _drop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __iter__(self) -> _Feed:
        return self


class PlanFeed(_Feed):
    """A rank's batches of ``plan`` in epoch ``epoch`` (see the module docstring); ``slots`` is ``M``."""

    def __init__(self, submit: Submit, recipe: Any, epoch: int, plan: EpochPlan, rank: int, *, in_flight: int,
                 per_task: int, slots: int, convert: Callable[[Any], Any], shards: Callable[[int, list[int]], Any]):
        super().__init__(submit, in_flight, per_task, convert)
        self.recipe, self.epoch, self.plan, self.rank, self.slots = recipe, epoch, plan, rank, slots
        self.consumed = plan.skip  # batches handed out (this pass's position: the loader's state)
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
        future = self.submit(plan_batches, self.recipe, self.epoch, self.plan, self.rank, batches[0], len(batches),
                             key=key, priority=-batches[0], shards=self._shards(self.epoch, batches))
        self._tasks[number] = _Task(future, len(batches))
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
        if self.consumed < self.plan.num_batches:
            self._fill(self._where(self.consumed)[0])
        return self

    def __next__(self) -> Any:
        if self.finished or self.consumed >= self.plan.num_batches:
            self.finished = True
            raise StopIteration
        number, index = self._where(self.consumed)
        self._fill(number)
        task = self._tasks[number]
        batch = task.take(index)
        self._held -= 1
        if not task.left:
            del self._tasks[number]
        self.consumed += 1
        self._fill(number)
        return self.convert(batch)

    def futures(self) -> list[Any]:
        return [t.future for t in self._tasks.values() if t.future is not None]

    def _drop(self) -> None:
        self._tasks.clear()
        self._held = 0


class _Slot:
    """One slot of a :class:`SlotFeed`: its position, its received batches, its submitted task."""

    __slots__ = ("number", "state", "ended", "batches", "states", "done", "future", "size")

    def __init__(self, number: int, state: dict[str, Any] | None, ended: bool):
        self.number, self.state, self.ended = number, state, ended
        self.batches: collections.deque[Any] = collections.deque()
        self.states: collections.deque[dict[str, Any]] = collections.deque()
        self.done = ended  # the received batches are the slot's last ones
        self.future: Any = None
        self.size = 0  # batches the submitted task may make

    @property
    def held(self) -> int:
        return len(self.batches) + self.size


class SlotFeed(_Feed):
    """A pipeline's batches from ``slots`` slots (see the module docstring). ``position`` is where a saved state
    left the slots: their states (None: not started), which of them ended, and whose turn it is."""

    def __init__(self, submit: Submit, recipe: Any, epoch: int, rank: int, world_size: int, *, slots: int,
                 in_flight: int, per_task: int, convert: Callable[[Any], Any], fingerprint: dict[str, Any],
                 position: dict[str, Any] | None = None):
        super().__init__(submit, in_flight, per_task, convert)
        self.recipe, self.epoch, self.rank, self.world_size = recipe, epoch, rank, world_size
        self.fingerprint = fingerprint
        states = position["slots"] if position else [None] * slots
        ended = position["ended"] if position else [False] * slots
        self.slots = [_Slot(k, states[k], ended[k]) for k in range(slots)]
        self.turn = position["turn"] if position else 0
        self._count = itertools.count()

    @property
    def held(self) -> int:
        return sum(slot.held for slot in self.slots)

    def _submit(self, slot: _Slot, state: dict[str, Any] | None) -> None:
        key = f"shardstream-slot-{self.pass_id}-{self.epoch}-{self.rank}-{slot.number}-{next(self._count)}"
        slot.future = Fetched(self.submit(slot_batches, self.recipe, self.epoch, self.rank, self.world_size,
                                          slot.number, len(self.slots), state, self.per_task, key=key, priority=0,
                                          shards=None))
        slot.size = self.per_task

    def _receive(self, slot: _Slot) -> None:
        batches, states, ended = slot.future.get()  # re-raises the task's own error
        slot.future, slot.size = None, 0
        slot.batches.extend(batches)
        slot.states.extend(states)
        slot.done = ended
        if not ended and self.held + self.per_task <= self.in_flight:  # the slot's next task, from where it ends
            self._submit(slot, states[-1] if states else slot.state)

    def _top_up(self) -> None:
        """Submit the next task of the slots that have none, in turn order, while the budget allows."""
        count = len(self.slots)
        for k in range(count):
            slot = self.slots[(self.turn + k) % count]
            if slot.future is None and not slot.done and self.held + self.per_task <= self.in_flight:
                self._submit(slot, slot.states[-1] if slot.states else slot.state)

    def start(self) -> SlotFeed:
        """Submit each running slot's first task, in turn order, within the budget."""
        order = self.slots[self.turn:] + self.slots[: self.turn]
        for slot in order:
            if not slot.ended and (self.held + self.per_task <= self.in_flight or not self.held):
                self._submit(slot, slot.state)
        return self

    def __next__(self) -> Any:
        while not self.finished:
            live = [s for s in self.slots if not s.ended]
            if not live:
                self.finished = True
                break
            slot = self.slots[self.turn]
            if slot.ended:
                self.turn = (self.turn + 1) % len(self.slots)
                continue
            if not slot.batches:
                if slot.done:
                    slot.ended = True
                    continue
                if slot.future is None:
                    self._submit(slot, slot.states[-1] if slot.states else slot.state)
                self._receive(slot)
                continue
            batch = slot.batches.popleft()
            slot.state = slot.states.popleft()
            self.turn = (self.turn + 1) % len(self.slots)
            self._top_up()
            return self.convert(batch)
        raise StopIteration

    def state_dict(self) -> dict[str, Any]:
        """The slots' positions (after the batches handed out), which of them ended, and whose turn it is."""
        ended = [s.ended or (s.done and not s.batches) for s in self.slots]
        epoch = self.epoch + 1 if all(ended) else self.epoch
        if all(ended):
            return envelope("pipeline", self.fingerprint, epoch, slots=[None] * len(self.slots), turn=0,
                            ended=[False] * len(self.slots))
        return envelope("pipeline", self.fingerprint, epoch, slots=[s.state for s in self.slots], turn=self.turn,
                        ended=ended)

    def futures(self) -> list[Any]:
        return [s.future.future for s in self.slots if s.future is not None and s.future.future is not None]

    def _drop(self) -> None:
        for slot in self.slots:
            slot.batches.clear()
            slot.future, slot.size = None, 0
