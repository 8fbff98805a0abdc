"""TrainingLoader: torch's DataLoader over a TrainingDataset, with ``set_epoch``, ``state_dict`` and
``load_state_dict``.

The loader counts the batches it hands out. Since every batch of a rank is determined by the epoch plan, that
count *is* the state: restoring computes the plan again and skips what was consumed, without reading it (a
resume at 90% of an epoch costs what a resume at 10% does). The DataLoader's workers each produce every
``num_workers``-th batch of the rank and the DataLoader returns them in order, so the rank's batches are the
same whatever the number of workers, and a state restores with other numbers of workers or ranks, or another
batch size: the positions nobody consumed are dealt again (elastic resume). A state saved on any rank restores
every rank (ranks consume in lockstep under DDP).

Each ``iter()`` is the next epoch, or the one given to ``set_epoch``; the loader gives it to the dataset copies
in the workers. ``persistent_workers=True`` is supported: the workers are re-created only when they would not
know the epoch to serve (after ``set_epoch`` to another epoch, or ``load_state_dict``).

>>> from shardstream.writer import ShardWriter
>>> from shardstream.training import TrainingDataset
>>> with ShardWriter("part-%02d.tar", maxcount=10) as sink:
...     for i in range(30):
...         _ = sink.write({"__key__": f"k{i:02d}", "cls": i})
>>> loader = TrainingLoader(TrainingDataset("part-{00..02}.tar", batch_size=8, decode=True), num_workers=0)
>>> it = iter(loader); first = next(it); state = loader.state_dict()
>>> rest = [b["cls"].tolist() for b in it]
>>> again = TrainingLoader(TrainingDataset("part-{00..02}.tar", batch_size=8, decode=True), num_workers=0)
>>> again.load_state_dict(state)
>>> [b["cls"].tolist() for b in again] == rest, len(rest), loader.epoch
(True, 3, 1)
"""


from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from ..errors import ConfigError, MissingDependencyError, StateError
from ..resume import Resumable
from .dataset import TrainingDataset
from .plan import EpochPlan
from .state import check_state

__all__ = ["TrainingLoader"]

_REFUSED = ("batch_size", "shuffle", "sampler", "batch_sampler", "drop_last")


class _Position:
    """Where the loader's current pass is: its epoch, its plan for this rank, the batches handed out so far.

    The loader's progress record (a :class:`~shardstream.resume.Progress`) keeps this, not the pass: a pass dropped
    mid-epoch (a ``break``) lets its DataLoader workers go at once, and the loader still knows where it stopped."""

    __slots__ = ("_loader", "epoch", "plan", "consumed", "finished")

    def __init__(self, loader: TrainingLoader, epoch: int, plan: EpochPlan):
        self._loader = weakref.ref(loader)  # the loader keeps this record: no reference cycle (see Progress)
        self.epoch, self.plan, self.consumed, self.finished = epoch, plan, plan.skip, False

    def state_dict(self) -> dict[str, Any]:
        """The batches consumed in this pass; once they all are, the start of the loader's next epoch."""
        loader = self._loader()
        if loader is None:
            raise StateError("the TrainingLoader of this pass is gone: ask the loader for its state_dict()")
        if self.finished or self.consumed >= self.plan.num_batches:
            return loader._initial_state()
        return loader.dataset.state_for(self.epoch, self.plan, self.consumed, rank=loader._rank_and_world()[0])


class _Pass:
    """One iteration of the loader: the DataLoader's iterator, counted."""

    def __init__(self, position: _Position, batches: Iterator[Any]):
        self.position, self.batches = position, batches

    def __iter__(self) -> _Pass:
        return self

    def __next__(self) -> Any:
        try:
            batch = next(self.batches)
        except StopIteration:
            self.position.finished = True
            raise
        self.position.consumed += 1
        return batch


class TrainingLoader(Resumable):
    """A DataLoader for a :class:`~shardstream.training.TrainingDataset` (see the module docstring).

    ``num_workers`` and the other keyword arguments go to ``torch.utils.data.DataLoader`` (``pin_memory``,
    ``prefetch_factor``, ``persistent_workers``, ``multiprocessing_context``, ``collate_fn``...); the dataset
    makes the batches, so ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last`` belong to it, not here.
    ``collate_fn`` defaults to torch's conversion of numpy arrays into tensors.

    Epochs, the restored state and the latest pass's position follow :class:`~shardstream.resume.Resumable`, but
    ``iter()`` moves on to the next epoch at once (not at the first batch), and after ``set_epoch`` the state is
    still the latest pass's position until the next ``iter()`` (the batches it handed out are consumed).
    """

    #: the batches a pass handed out are consumed, whatever epoch the loader is told to serve next
    _epoch_forgets_progress = False

    def __init__(self, dataset: TrainingDataset, *, num_workers: int = 0, **kwargs: Any):
        if not isinstance(dataset, TrainingDataset):
            raise ConfigError(f"TrainingLoader needs a TrainingDataset, not {type(dataset).__name__}")
        refused = [k for k in _REFUSED if k in kwargs]
        if refused:
            raise ConfigError(f"TrainingLoader: {', '.join(refused)} belong to the TrainingDataset "
                              "(TrainingDataset(..., batch_size=, shuffle=, drop_last=))")
        if kwargs.get("in_order", True) is False:
            raise ConfigError("TrainingLoader needs in_order=True: the rank's batches come back in plan order")
        try:
            from torch.utils.data import DataLoader  # noqa: PLC0415 - optional: shardstream[torch]
        except ImportError as e:
            raise MissingDependencyError("TrainingLoader (torch's DataLoader)", "torch", "torch") from e
        self._dataloader_class = DataLoader
        self.dataset, self.num_workers, self.kwargs = dataset, int(num_workers), kwargs
        self._epoch = dataset.epoch
        self._persistent: Any = None  # (DataLoader, the epoch its workers serve next)

    def _rank_and_world(self) -> tuple[int, int]:
        return self.dataset.rank_and_world()

    def _plan(self, pending: dict[str, Any] | None) -> EpochPlan:
        rank, world = self._rank_and_world()
        workers = max(1, self.num_workers)
        if pending is not None:
            return self.dataset.resume_point(pending, rank=rank, world_size=world, num_workers=workers)[1]
        return self.dataset.plan(world_size=world, num_workers=workers)

    def __iter__(self) -> _Pass:
        epoch, pending = self._epoch, self._pending
        plan = self._plan(pending)
        dataset = self.dataset
        with dataset.bound(*self._rank_and_world()):  # workers may not see the ranks
            dataset.set_epoch(epoch)
            if pending is not None:
                dataset.load_state_dict(pending)
            batches = iter(self._dataloader(epoch, pending is not None))  # workers take their copies now
        dataset.set_epoch(epoch + 1)  # the dataset's next epoch; its pending state and iterator are used up
        self._take_pending()
        position = _Position(self, epoch, plan)
        self._begin(epoch, position).start()  # the next iter() serves the next epoch, from now on
        return _Pass(position, batches)

    def _dataloader(self, epoch: int, restoring: bool) -> Any:
        if not (self.kwargs.get("persistent_workers") and self.num_workers > 0):
            return self._dataloader_class(self.dataset, batch_size=None, num_workers=self.num_workers, **self.kwargs)
        if self._persistent is None or restoring or self._persistent[1] != epoch:
            loader: Any = self._dataloader_class(self.dataset, batch_size=None, num_workers=self.num_workers, **self.kwargs)
            self._persistent = [loader, epoch]
        self._persistent[1] = epoch + 1  # the workers' copies move on by one epoch per pass
        return self._persistent[0]

    def __len__(self) -> int:
        """Batches the next ``iter()`` yields."""
        return self._plan(self._pending).remaining_batches

    def state_dict(self) -> dict[str, Any]:
        """Where the loader is: the current pass's consumed batches, a restored state not yet used, or the start
        of the next epoch (a rank state: restorable with other numbers of ranks and workers)."""
        return super().state_dict()

    def _initial_state(self) -> dict[str, Any]:
        rank, world = self._rank_and_world()
        return self.dataset.start_state(self._epoch, rank=rank, world_size=world)

    def _check_state(self, state: Any) -> None:
        check_state(state, self.dataset.fingerprint, "this loader")
        if "batches" not in state:
            raise StateError("this state was saved inside one DataLoader worker; restore a TrainingLoader from "
                             "TrainingLoader.state_dict() (or the dataset's own state)")
        self._plan(state)  # every field checked now (a StateError names a damaged one), not at the next iter()

    def __repr__(self) -> str:
        return f"TrainingLoader({self.dataset!r}, num_workers={self.num_workers}, epoch={self._epoch})"
