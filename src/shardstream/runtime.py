"""Where an iteration runs, and the one rule that turns seeds into keys.

:class:`Placement` is the rank among ranks and the DataLoader worker among workers. The rank comes from
``torch.distributed`` when it is initialised, else from the settings (``RANK`` and ``WORLD_SIZE``, read by
:mod:`shardstream.config`, the only reader of the environment). The worker comes from
``torch.utils.data.get_worker_info()``. torch is never imported here: a process that has not imported torch
cannot be a DataLoader worker nor have initialised ``torch.distributed``.

A framework that deals the data to the ranks itself makes every rank's dataset a single rank
(:func:`framework_split`): Accelerate's prepared loaders (``dispatch_batches=True``: rank 0 reads everything and
sends each rank its part; ``dispatch_batches=False``: every rank reads everything and keeps its slice of each
batch). Splitting the shards between the ranks as well would lose data (each rank would see half of half).

:func:`derive_key` is the single seed-derivation rule of the package: every random choice (a pipeline stage's
``Context.rng``, the orders of :mod:`shardstream.order`, the samplers) starts from a key it derives from
printable values such as ``(seed, epoch, ...)``. No global random state, time or process id is involved.

>>> p = Placement.current()
>>> (p.worker, p.num_workers) == (0, 1)
True
>>> derive_key("global", 0, 1) == derive_key("global", 0, 1) != derive_key("global", 0, 2)
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from types import FrameType
from typing import Any

from .config import get_settings
from .errors import ConfigError

__all__ = ["Placement", "derive_key", "distributed_rank", "framework_split", "worker_info"]

#: the loaders of frameworks that deal the data to the ranks themselves: (module, class names)
_DEALERS = (("accelerate.data_loader", ("DataLoaderDispatcher", "IterableDatasetShard")),)


def derive_key(*parts: Any) -> int:
    """A 64-bit key from any printable values (``derive_key("global", seed, epoch)``), via BLAKE2b.

    >>> derive_key(1, 2) == derive_key(1, 2) != derive_key(2, 1)
    True
    """
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "little")


def distributed_rank() -> tuple[int, int]:
    """``(rank, world_size)``: from an initialised ``torch.distributed``, else the settings, else ``(0, 1)``.

    >>> distributed_rank()[1] >= 1
    True
    """
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    settings = get_settings()
    rank = settings.rank if settings.rank is not None else 0
    world = settings.world_size if settings.world_size is not None else 1
    if world < 1 or not 0 <= rank < world:
        raise ConfigError(f"RANK={rank} and WORLD_SIZE={world} are inconsistent: need 0 <= RANK < WORLD_SIZE")
    return rank, world


def replica(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """``(num_replicas, rank)`` for a sampler: the values given, the missing ones from :func:`distributed_rank`.

    >>> replica(4, 1)
    (4, 1)
    """
    if num_replicas is None or rank is None:
        found_rank, found_world = distributed_rank()
        rank = found_rank if rank is None else rank
        num_replicas = found_world if num_replicas is None else num_replicas
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ConfigError(f"need 0 <= rank < num_replicas, got rank={rank}, num_replicas={num_replicas}")
    return num_replicas, rank


def worker_info() -> tuple[int, int, int | None]:
    """``(worker, num_workers, loader_seed)`` inside a DataLoader worker, else ``(0, 1, None)``.

    ``loader_seed`` is the seed the DataLoader drew for this pass over the data (the same in all its workers).

    >>> worker_info()
    (0, 1, None)
    """
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is None:
        return 0, 1, None
    return info.id, info.num_workers, info.seed - info.id


def framework_split() -> str | None:
    """The framework that deals this iteration's data to the ranks, or None: ``"accelerate"`` when an Accelerate
    loader (``DataLoaderDispatcher``, or ``IterableDatasetShard`` under ``dispatch_batches=False``) is iterating
    the dataset, in this process or in the one that started this DataLoader worker, or asking its length (then
    the whole dataset's, which Accelerate divides between the ranks itself).

    >>> framework_split() is None
    True
    """
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    found = _dealer(type(info.dataset)) if info is not None else None
    frame: FrameType | None = sys._getframe(1)
    while found is None and frame is not None:  # the callers (a forked worker still has its parent's frames)
        if frame.f_code.co_name in ("__iter__", "_fetch_batches", "__len__"):  # len(): the length it deals
            found = _dealer(type(frame.f_locals.get("self")))
        frame = frame.f_back
    return found


def _dealer(cls: type) -> str | None:
    for module, names in _DEALERS:
        if cls.__module__ == module and cls.__name__ in names:
            return module.partition(".")[0]
    return None


@dataclasses.dataclass(frozen=True)
class Placement:
    """Rank and worker of the running iteration.

    >>> Placement(rank=1, world_size=2).world_size
    2
    """

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    loader_seed: int | None = None
    #: the framework that deals the data to the ranks (then rank and world_size are 0 and 1: see the module doc)
    framework: str | None = None

    @classmethod
    def current(cls, framework: str | None = None) -> Placement:
        """Read the placement now (call it where the data is iterated: inside the worker). ``framework``: the
        one :func:`framework_split` found where the dataset was copied into this worker (spawned workers do not
        see their parent's callers)."""
        framework = framework_split() or framework
        rank, world = (0, 1) if framework else distributed_rank()
        worker, workers, loader_seed = worker_info()
        return cls(rank, world, worker, workers, loader_seed, framework)
