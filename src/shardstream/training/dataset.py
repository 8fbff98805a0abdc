"""TrainingDataset: batches of shuffled samples with exact epochs across ranks, resumable mid-epoch.

A ``TrainingDataset`` is a picklable recipe: the shards and their sample counts, the shuffle, the batch size.
Each ``iter()`` computes the epoch plan (:mod:`~shardstream.training.plan`: which positions of the epoch order
this rank serves, batch by batch) and returns a :class:`~shardstream.training.iterators.PlanIterator` that reads
them. Inside DataLoader workers, worker ``w`` of ``W`` produces the rank's batches ``w, w + W, ...``, which the
DataLoader returns in order: the rank's sequence of batches does not depend on the number of workers.

Shuffles (``shuffle=``): ``"global"`` (default; a uniform permutation of all samples, read by random access),
``"window"`` (random access within windows of ``window`` shards), ``"stream"`` (no index: ``window`` shards read
at once, shuffled in blocks of ``buffer`` samples), ``"none"`` (in order).

Epochs: ``set_epoch(n)`` chooses the epoch; each iteration of the dataset object itself moves on to the next one
(when its iterator yields its first batch: an iterator made and never used changes nothing).
Inside a plain ``DataLoader`` the workers get copies, so call ``set_epoch`` every epoch (as with torch's
``DistributedSampler``), or use :class:`~shardstream.training.TrainingLoader`, which does.

>>> from shardstream.writer import ShardWriter
>>> with ShardWriter("train-%02d.tar", maxcount=5) as sink:
...     for i in range(12):
...         _ = sink.write({"__key__": f"k{i:02d}", "cls": i})
>>> ds = TrainingDataset("train-{00..02}.tar", batch_size=4, seed=0, decode=True)
>>> batches = [b["__key__"] for b in ds]
>>> len(batches), sorted(sum(batches, [])) == [f"k{i:02d}" for i in range(12)]
(3, True)
>>> ds.set_epoch(0); it = iter(ds); first = next(it)["__key__"]; state = ds.state_dict()
>>> fresh = TrainingDataset("train-{00..02}.tar", batch_size=4, seed=0, decode=True)
>>> fresh.load_state_dict(state)
>>> [b["__key__"] for b in fresh] == batches[1:]
True
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..codecs import as_decoder
from ..errors import ConfigError, StateError
from ..indexed.mixsampler import MixOrder
from ..io.cache import cache_opener
from ..order import SHUFFLES, SampleOrder, StreamOrder
from ..pipeline.datapipeline import IterableDatasetBase
from ..pipeline.stages.batching import default_collation_fn
from ..resume import Resumable
from ..resume.fields import MAX_WORKERS, field, refuse
from ..runtime import Placement
from ..spec import is_spec, training_sources
from .iterators import DatasetCursor, IndexedReader, PlanIterator, StreamReader
from .plan import EpochPlan
from .sources import resolve
from .state import KIND, check_state, envelope, fingerprint, plan_from_dict, plan_to_dict

__all__ = ["TrainingDataset"]


class TrainingDataset(Resumable, IterableDatasetBase):
    """Shuffled batches of one rank, exact epochs, mid-epoch resume (see the module docstring).

    :param source: shard URLs (a brace pattern or a list), a dataset index ``.json``, or an
        :class:`~shardstream.indexed.IndexedDataset`
    :param batch_size: samples per batch (every rank gets the same number of batches)
    :param seed: with the epoch, determines every order
    :param shuffle: ``"global"``, ``"window"``, ``"stream"`` or ``"none"``
    :param window: shards mixed at a time (``"window"``: shards per window; ``"stream"``: shards read at once)
    :param buffer: ``"stream"``: samples shuffled together (memory: ``buffer`` samples plus ``window`` streams)
    :param open_ahead: ``"stream"``: the most remote shards opened ahead at once while a block is read (None: the
        process's share of ``SHARDSTREAM_HTTP_CONNECTIONS``; 0: each shard opened when it is first read); see
        :mod:`shardstream.training.ahead`
    :param drop_last: False: every sample is served, the first few (< ranks) twice when the count does not divide;
        True: only full batches, fewer than ``ranks * batch_size`` samples left out (different ones each epoch)
    :param decode: as ``IndexedDataset(decode=)`` (``True``, ``"rgb"``, a Decoder, a callable)
    :param map: a callable applied to each sample after decoding
    :param collate: makes a batch of a list of samples (default: :func:`~shardstream.pipeline.default_collation_fn`;
        None keeps the list)
    :param rank, world_size: this process's rank (default: ``torch.distributed``, else ``RANK``/``WORLD_SIZE``)
    :param lengths: ``"stream"``: samples per shard (a list, or a dict by URL) when known
    :param cache_dir: remote shards go through this shard cache
    :param keys: the key rule (see :class:`shardstream.samples.KeyRule`)
    :param allow_commands: let a dataset index ``.json`` name ``pipe:CMD`` shards (runs commands: trusted files only)
    :param progress: a progress bar on stderr while the shards are indexed or counted (their sidecars built where
        missing or stale): None (the default) when stderr is a terminal, True, or False
    """

    def __init__(self, source: Any, *, batch_size: int, seed: int | str = 0, shuffle: str = "global",
                 window: int = 8, buffer: int = 1000, drop_last: bool = False, decode: Any = None,
                 map: Callable[[Any], Any] | None = None, collate: Callable[[list[Any]], Any] | None = default_collation_fn,
                 rank: int | None = None, world_size: int | None = None,
                 lengths: Sequence[int] | Mapping[str, int] | None = None, cache_dir: Any = None, keys: Any = None,
                 allow_commands: bool = False, progress: bool | None = None, open_ahead: int | None = None):
        super().__init__()
        if shuffle not in SHUFFLES:
            raise ConfigError(f"shuffle must be one of {SHUFFLES}, not {shuffle!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if window < 1 or buffer < 1:
            raise ConfigError(f"window and buffer must be >= 1, got window={window}, buffer={buffer}")
        if open_ahead is not None and (isinstance(open_ahead, bool) or not isinstance(open_ahead, int)
                                       or open_ahead < 0):
            raise ConfigError(f"open_ahead must be an integer >= 0 or None, got {open_ahead!r}")
        if (rank is None) != (world_size is None) or (world_size is not None and not 0 <= rank < world_size):  # type: ignore[operator]
            raise ConfigError(f"give both rank and world_size, with 0 <= rank < world_size (got {rank}, {world_size})")
        self.batch_size, self.seed, self.shuffle, self.drop_last = batch_size, seed, shuffle, bool(drop_last)
        self.window, self.buffer, self.open_ahead = int(window), int(buffer), open_ahead
        self.stream = shuffle == "stream"
        self._keys, self._collate = keys, collate
        self._finishers = tuple(f for f in (as_decoder(decode), map) if f is not None)
        opener = None
        if self.stream and cache_dir is not None:
            opener = cache_opener(cache_dir)
        self._opener = opener
        self._mix: tuple[list[int], list[int]] | None = None  # a spec's (samples, count) per source
        spec, shards = None, []  # type: Any, list[int]
        if is_spec(source):  # the sources' shards, read by random access and mixed exactly
            if shuffle != "global":
                raise ConfigError(f"a dataset spec is mixed exactly with shuffle='global', not {shuffle!r}")
            source, shards, spec = training_sources(source, allow_commands=allow_commands)
        resolved = resolve(source, stream=self.stream, lengths=lengths, cache_dir=cache_dir, rule=keys, opener=opener,
                           allow_commands=allow_commands, progress=progress)
        self.lengths, self._indexed, self._urls = resolved.lengths, resolved.reader, resolved.urls
        if spec is not None:
            ends = list(itertools.accumulate(shards, initial=0))  # each source's shards, laid end to end
            sizes = [int(sum(self.lengths[a:b])) for a, b in zip(ends[:-1], ends[1:], strict=False)]
            self._mix = (sizes, spec.counts(sizes))
        self._placement: tuple[int, int] | None = None if rank is None else (rank, world_size)  # type: ignore[assignment]
        self._epoch, self._epoch_source = 0, "auto"
        self._pending = None  # a restored state, consumed by the next iter() (see Resumable)
        self._progress = None  # the latest iterator made in this process

    # -- description ------------------------------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        """Samples in the dataset (one epoch, before padding or dropping; a spec's: the sum of its counts)."""
        return int(sum(self._mix[1] if self._mix is not None else self.lengths))

    @property
    def fingerprint(self) -> dict[str, Any]:
        """What a saved state must agree with, its ``"fingerprint"`` (see
        :func:`~shardstream.training.state.fingerprint`): the settings that shape the order and the shards' lengths."""
        mix = {} if self._mix is None else {"mix": list(self._mix[1])}
        shape = self.__dict__.get("_shape")
        if shape is None:  # the lengths' digest, once: a state is saved every few batches, the shards never change
            shape = self.__dict__["_shape"] = fingerprint(self.lengths)
        return {"seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last, **mix,
                "window": self.window if self.shuffle in ("window", "stream") else None,
                "buffer": self.buffer if self.stream else None, **shape}

    @property
    def config(self) -> dict[str, Any]:
        """:attr:`fingerprint` (its former name)."""
        return self.fingerprint

    def order(self, epoch: int) -> SampleOrder | StreamOrder | MixOrder:
        """The epoch order (positions -> samples), independent of ranks and workers."""
        if self._mix is not None:
            return MixOrder(*self._mix, seed=self.seed, epoch=int(epoch))
        if self.stream:
            return StreamOrder(self.lengths, self.seed, int(epoch), True, self.window, self.buffer)
        return SampleOrder(self.lengths, self.seed, int(epoch), self.shuffle, self.window)

    def rank_and_world(self) -> tuple[int, int]:
        """This process's ``(rank, world_size)``: given, bound by a loader, or from the runtime."""
        if self._placement is not None:
            return self._placement
        current = Placement.current(self._framework)
        return current.rank, current.world_size

    @contextlib.contextmanager
    def bound(self, rank: int, world_size: int) -> Iterator[TrainingDataset]:
        """Within the ``with`` block, this dataset is rank ``rank`` of ``world_size`` (whatever the runtime says):
        a loader binds it while its DataLoader copies it into worker processes, which may not see
        ``torch.distributed``. A rank given to the constructor is kept.

        >>> ds = TrainingDataset("train-{00..02}.tar", batch_size=4)
        >>> with ds.bound(1, 2):
        ...     ds.rank_and_world()
        (1, 2)
        >>> ds.rank_and_world()
        (0, 1)
        """
        before = self._placement
        if before is None:
            self._placement = (int(rank), int(world_size))
        try:
            yield self
        finally:
            self._placement = before

    def plan(self, *, world_size: int | None = None, num_workers: int = 1) -> EpochPlan:
        """A fresh epoch's plan for ``world_size`` ranks (default: this process's) and ``num_workers`` workers
        (the same for every epoch: the epoch only changes the order, see :meth:`order`)."""
        world = self.rank_and_world()[1] if world_size is None else world_size
        return EpochPlan(self.num_samples, world, self.batch_size, self.drop_last, num_workers, self.stream)

    # -- epochs and iteration ---------------------------------------------------------------------------------
    # -- iteration (epochs, pending state and progress: see Resumable) ------------------------------------------
    def _start(self, rank: int, world: int, worker: int, workers: int) -> tuple[int, EpochPlan, int | None]:
        """The epoch, plan and first batch of an iteration starting now (consumes a restored state)."""
        epoch, pending = self._epoch, self._take_pending()
        if pending is not None:
            return self.resume_point(pending, rank=rank, world_size=world, worker=worker, num_workers=workers)
        return epoch, self.plan(world_size=world, num_workers=workers), None

    def __iter__(self) -> PlanIterator:
        here = Placement.current(self._framework)
        rank, world = self.rank_and_world()
        epoch, plan, first = self._start(rank, world, here.worker, here.num_workers)
        iterator = PlanIterator(self, epoch, plan, rank, here.worker, here.num_workers, first)
        iterator.progress = self._begin(epoch, iterator)
        return iterator

    def cursor(self, ctx: Any = None) -> DatasetCursor:
        """This dataset as the source of a pipeline or a mix (see
        :class:`~shardstream.training.iterators.DatasetCursor`)."""
        return DatasetCursor(self, f"the source {type(self).__name__}")

    def __len__(self) -> int:
        """Batches the next ``iter()`` yields on this rank (all workers together)."""
        rank, world = self.rank_and_world()
        if self._pending is not None and "batches" in self._pending:
            return self.resume_point(self._pending, rank=rank, world_size=world)[1].remaining_batches
        return self.plan(world_size=world).num_batches

    # -- reading (called by PlanIterator, in the process that reads) ------------------------------------------
    def reader(self, epoch: int) -> IndexedReader | StreamReader:
        """What reads the samples at positions of epoch ``epoch``'s order (``reader.read(positions)``; close it)."""
        order = self.order(epoch)
        if isinstance(order, StreamOrder):
            return StreamReader(self._urls, order, rule=self._keys, opener=self._opener, open_ahead=self.open_ahead)
        return IndexedReader(self._indexed.packed(), order)  # type: ignore[union-attr, arg-type]

    @property
    def collates_raw(self) -> bool:
        """Whether batches are the default collation of the samples as read (no decoder, map or other collate):
        an indexed reader then makes them column by column (the same batches, without the sample dicts)."""
        return not self._finishers and self._collate is default_collation_fn

    def make_batch(self, samples: list[Any]) -> Any:
        """One batch of ``samples`` as read: decoded, mapped and collated as this dataset says."""
        for finish in self._finishers:
            samples = [finish(sample) for sample in samples]
        return samples if self._collate is None else self._collate(samples)

    # -- state ------------------------------------------------------------------------------------------------
    def state_for(self, epoch: int, plan: EpochPlan, next_batch: int, *, rank: int = 0, worker: int = 0,
                  num_workers: int = 1) -> dict[str, Any]:
        """The state of the position ``next_batch`` of ``plan`` in epoch ``epoch`` (see
        :mod:`~shardstream.training.state`): a rank state with one worker (``next_batch`` batches consumed), else
        the state of worker ``worker`` of ``num_workers`` on rank ``rank`` (its next batch)."""
        position: dict[str, Any] = {"plan": plan_to_dict(plan)}
        if num_workers == 1:
            position["batches"] = next_batch  # the same on every rank: any rank's state restores all of them
        else:
            position.update(rank=rank, worker=worker, num_workers=num_workers, next=next_batch)
        return envelope(KIND, self.fingerprint, epoch, **position)

    def start_state(self, epoch: int, *, rank: int = 0, world_size: int = 1, worker: int = 0,
                    num_workers: int = 1) -> dict[str, Any]:
        """The state of the start of epoch ``epoch`` for ``world_size`` ranks and ``num_workers`` workers."""
        plan = self.plan(world_size=world_size, num_workers=num_workers)
        return self.state_for(epoch, plan, plan.skip + worker, rank=rank, worker=worker, num_workers=num_workers)

    def resume_point(self, state: Any, *, rank: int, world_size: int | None = None, worker: int = 0,
                     num_workers: int = 1) -> tuple[int, EpochPlan, int | None]:
        """Where ``state`` continues, here (checked: a :class:`~shardstream.errors.StateError` names what differs):
        ``(epoch, plan, next_batch)``. A rank state is planned again for ``world_size`` ranks (default: the saved
        number) and ``num_workers`` workers (``next_batch`` is then None: each worker starts at its first batch of
        the plan); a worker state restores only in the worker, rank and numbers that saved it.

        >>> ds = TrainingDataset("train-{00..02}.tar", batch_size=4, seed=0)
        >>> state = ds.state_for(0, ds.plan(world_size=1), 1)  # one batch of 4 consumed on 1 rank
        >>> epoch, plan, first = ds.resume_point(state, rank=0, world_size=2)  # the 8 samples left, on 2 ranks
        >>> epoch, plan.world_size, plan.remaining_batches, first
        (0, 2, 1, None)
        """
        epoch, saved, batches, worker_at = self._position(state)
        world = saved.world_size if world_size is None else world_size
        if batches is not None:  # a rank state: re-plan for the ranks and workers of now
            plan = saved.resume(batches, world_size=world, batch_size=self.batch_size, num_workers=num_workers)
            return epoch, plan, None
        saved_rank, saved_worker, saved_workers, next_batch = worker_at  # type: ignore[misc]
        if (saved_rank, saved.world_size, saved_worker, saved_workers) != (rank, world, worker, num_workers):
            raise StateError(
                f"this state was saved by DataLoader worker {saved_worker} of {saved_workers} on rank {saved_rank} of "
                f"{saved.world_size}; it restores only there, not in worker {worker} of {num_workers} on rank {rank} "
                f"of {world} (save the loader's state, TrainingLoader.state_dict(), to resume elsewhere)"
            )
        return epoch, saved, next_batch

    def _position(self, state: Any) -> tuple[int, EpochPlan, int | None, tuple[int, int, int, int] | None]:
        """``state`` checked field by field (wherever it is restored): its epoch, its plan, and the batches consumed
        (a rank state) or ``(rank, worker, num_workers, next batch)`` (a worker state)."""
        what = "this dataset"
        check_state(state, self.fingerprint, what)
        saved = plan_from_dict(state["plan"], total=self.num_samples, drop_last=self.drop_last,
                               contiguous=self.stream, what=what)
        if "batches" in state:
            return int(state["epoch"]), saved, field(state, "batches", int, lo=0, hi=saved.num_batches, what=what), None
        if not all(key in state for key in ("rank", "worker", "num_workers", "next")):
            raise refuse(what, None, "lacks 'batches' (the batches a rank consumed) and 'rank', 'worker', "
                                     "'num_workers', 'next' (a DataLoader worker's position)")
        workers = field(state, "num_workers", int, lo=1, hi=MAX_WORKERS, what=what)
        at = (field(state, "rank", int, lo=0, hi=saved.world_size - 1, what=what),
              field(state, "worker", int, lo=0, hi=workers - 1, what=what), workers,
              field(state, "next", int, lo=0, hi=saved.num_batches + workers, what=what))
        return int(state["epoch"]), saved, None, at

    def state_dict(self) -> dict[str, Any]:
        """Where this dataset is: its current iterator's position, a restored state not yet used, or the start
        of the next epoch. Plain values only (ints, strings, lists, dicts).

        Under a DataLoader with workers the iterators live in the workers: take the state from the loader
        (:class:`~shardstream.training.TrainingLoader`, or torchdata's ``StatefulDataLoader``)."""
        return super().state_dict()

    def _initial_state(self) -> dict[str, Any]:
        here = Placement.current(self._framework)
        rank, world = self.rank_and_world()
        return self.start_state(self._epoch, rank=rank, world_size=world, worker=here.worker,
                                num_workers=here.num_workers)

    def _check_state(self, state: Any) -> None:
        self._position(state)

    def __repr__(self) -> str:
        return (f"TrainingDataset({self.num_samples} samples in {len(self.lengths)} shards, shuffle={self.shuffle!r}, "
                f"batch_size={self.batch_size}, seed={self.seed!r}, epoch={self._epoch})")
