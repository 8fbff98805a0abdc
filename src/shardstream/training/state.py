"""Training states: plain Python values (ints, strings, lists), checked strictly on restore.

A state says *where* an epoch is, never *what* was read. It is a :mod:`shardstream.resume` envelope of kind
``"training"``: the dataset's configuration :func:`fingerprint`, the epoch, the plan being served
(:class:`~shardstream.training.plan.EpochPlan` as a dict) and how many of its batches are consumed. Two positions
exist:

- a **rank** state (``"batches"``: batches this rank consumed), saved by
  :class:`~shardstream.training.TrainingLoader` and by a dataset iterated without DataLoader workers; it can be
  restored with other numbers of ranks, workers or another batch size (elastic resume);
- a **worker** state (``"worker"``, ``"num_workers"``, ``"next"``: the next batch this worker produces), saved
  inside DataLoader workers for torchdata's ``StatefulDataLoader``, which restores each worker's own state.

:func:`check_state` refuses a state from another dataset or configuration with an error naming every difference.

>>> config = {"seed": 1, "shuffle": "global", "samples": 10}
>>> state = envelope(KIND, config, 0, plan={}, batches=0)
>>> check_state(state, dict(config, seed=2), "this loader")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
shardstream.errors.StateError: cannot restore this loader: saved state has seed=1, this loader has seed=2...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import StateError
from ..resume import check_state as check_envelope, digest, envelope
from .plan import EpochPlan

__all__ = ["KIND", "check_state", "envelope", "fingerprint", "plan_from_dict", "plan_to_dict"]

KIND = "training"


def fingerprint(lengths: Sequence[int], **settings: Any) -> dict[str, Any]:
    """What a state must agree with to be restored: the settings that shape the epoch order, the sample count and
    a digest of the shard lengths (a dataset with other shards gives another order).

    >>> fingerprint([3, 4], seed=0)["samples"], len(fingerprint([3, 4], seed=0)["lengths"])
    (7, 16)
    """
    return {**settings, "samples": int(sum(lengths)), "shards": len(lengths),
            "lengths": digest(int(n) for n in lengths)}


def plan_to_dict(plan: EpochPlan) -> dict[str, Any]:
    """The plan as plain values (``total`` is implied by the configuration)."""
    return {
        "origin": [[lo, hi] for lo, hi in plan.origin],  # type: ignore[union-attr]
        "world_size": plan.world_size,
        "batch_size": plan.batch_size,
        "num_workers": plan.num_workers,
        "skip": plan.skip,
    }


def plan_from_dict(data: Mapping[str, Any], *, total: int, drop_last: bool, contiguous: bool) -> EpochPlan:
    """The plan a state describes, for a dataset of ``total`` samples."""
    missing = [k for k in ("origin", "world_size", "batch_size", "num_workers", "skip") if k not in data]
    if missing:
        raise StateError(f"cannot restore: the saved plan lacks {', '.join(repr(k) for k in missing)}")
    return EpochPlan(total=total, world_size=int(data["world_size"]), batch_size=int(data["batch_size"]),
                     drop_last=drop_last, num_workers=int(data["num_workers"]), contiguous=contiguous,
                     origin=tuple((int(lo), int(hi)) for lo, hi in data["origin"]), skip=int(data["skip"]))


def check_state(state: Any, config: Mapping[str, Any], what: str) -> None:
    """Raise :class:`~shardstream.errors.StateError` unless ``state`` is a training state of this version whose
    fingerprint equals ``config``; the message names every missing key and every difference."""
    check_envelope(state, KIND, config, what, keys=("plan",))
