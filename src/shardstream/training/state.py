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

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..resume import check_state as check_envelope, digest, envelope
from ..resume.fields import MAX_COUNT, MAX_PIECES, MAX_RANKS, MAX_WORKERS, field, mapping, refuse, shown, within
from .plan import EpochPlan

__all__ = ["KIND", "check_state", "envelope", "fingerprint", "plan_from_dict", "plan_to_dict"]

KIND = "training"
_PLAN = ("origin", "world_size", "batch_size", "num_workers", "skip")


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


def plan_from_dict(data: Any, *, total: int, drop_last: bool, contiguous: bool,
                   what: str = "this dataset") -> EpochPlan:
    """The plan a state describes (its ``"plan"``), for a dataset of ``total`` samples, every field checked: a
    damaged one raises :class:`~shardstream.errors.StateError` naming it (``"plan/num_workers"``). The numbers of
    ranks and workers are bounded (:data:`~shardstream.resume.fields.MAX_RANKS`, ``MAX_WORKERS`` and, for a
    streaming plan, whose restore walks every rank's and worker's run, ``MAX_PIECES``), the origin's intervals lie
    in ``0..total`` in order, apart, and ``skip`` within the plan's batches.

    >>> plan_from_dict({"origin": [[0, 9]], "world_size": 2, "batch_size": 2, "num_workers": 1, "skip": 1},
    ...                total=9, drop_last=False, contiguous=False).remaining_batches
    2
    """
    with within("plan"):
        data = mapping(data, what, _PLAN)
        world = field(data, "world_size", int, lo=1, hi=MAX_RANKS, what=what)
        batch = field(data, "batch_size", int, lo=1, hi=MAX_COUNT, what=what)
        workers = field(data, "num_workers", int, lo=1, hi=MAX_WORKERS, what=what)
        if contiguous and world * workers > MAX_PIECES:
            raise refuse(what, "num_workers", f"is {workers} with {world} ranks; a streaming plan has at most "
                                              f"{MAX_PIECES} runs (ranks x workers)")
        origin = field(data, "origin", list, what=what)
        intervals, at = [], 0
        for i, pair in enumerate(origin):
            ok = isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in pair)
            if not ok or not at <= pair[0] < pair[1] <= total:
                raise refuse(what, f"origin/{i}", f"is {shown(pair)}; expected [lo, hi] with {at} <= lo < hi <= "
                                                  f"{total} (intervals of the epoch's {total} positions, in order)")
            intervals.append((int(pair[0]), int(pair[1])))
            at = pair[1]
        skip = field(data, "skip", int, lo=0, hi=MAX_COUNT, what=what)
        plan = EpochPlan(total=total, world_size=world, batch_size=batch, drop_last=drop_last, num_workers=workers,
                         contiguous=contiguous, origin=tuple(intervals))
        if skip > plan.num_batches:
            raise refuse(what, "skip", f"is {skip}; the plan has {plan.num_batches} batches per rank")
    return dataclasses.replace(plan, skip=skip) if skip else plan


def check_state(state: Any, config: Mapping[str, Any], what: str) -> None:
    """Raise :class:`~shardstream.errors.StateError` unless ``state`` is a training state of this version whose
    fingerprint equals ``config``; the message names every missing key and every difference."""
    check_envelope(state, KIND, config, what, keys=("plan",))
