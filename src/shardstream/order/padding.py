"""Pad or drop: the one rule that makes the positions of an epoch divisible between ranks.

Ranks serve equal shares. When the count of positions does not divide, ``drop_last=False`` pads: the count goes up
to the next multiple of the ranks and the positions past the end are the first ones again (fewer than ``parts``
of them are served twice); ``drop_last=True`` drops: the count goes down to a multiple of ``parts * unit``
(``unit``: positions that must stay together, a batch, so that every batch is full) and the last positions are
not served. :class:`~shardstream.indexed.DistributedLocalitySampler` and the training
:class:`~shardstream.training.EpochPlan` both follow it.

>>> even_count(10, 4, drop_last=False), even_count(10, 4, drop_last=True), even_count(10, 2, drop_last=True, unit=3)
(12, 8, 6)
>>> pad_or_drop(np.arange(5), 2, drop_last=False).tolist(), pad_or_drop(np.arange(5), 2, drop_last=True).tolist()
([0, 1, 2, 3, 4, 0], [0, 1, 2, 3])
>>> wrapped(np.arange(6), 5).tolist()  # where the served positions come from
[0, 1, 2, 3, 4, 0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["even_count", "pad_or_drop", "wrapped"]


def even_count(count: int, parts: int, *, drop_last: bool, unit: int = 1) -> int:
    """How many positions ``parts`` ranks serve of ``count``: padded up to a multiple of ``parts``, or
    (``drop_last``) cut down to a multiple of ``parts * unit``.

    >>> even_count(7, 2, drop_last=False), even_count(7, 2, drop_last=True, unit=2), even_count(0, 3, drop_last=False)
    (8, 4, 0)
    """
    whole = parts * unit
    return whole * (count // whole) if drop_last else parts * -(-count // parts)


def wrapped(served: np.ndarray, count: int) -> np.ndarray:
    """The positions (``0 .. count-1``) that the served positions ``served`` (``0 .. even_count(...)-1``) repeat:
    past ``count``, padding starts again from the first position.

    >>> wrapped(np.array([0, 6, 7]), 6).tolist()
    [0, 0, 1]
    """
    return np.where(served < count, served, (served - count) % max(count, 1))


def pad_or_drop(order: np.ndarray, parts: int, *, drop_last: bool) -> np.ndarray:
    """``order`` made divisible between ``parts`` ranks: its first items repeated at its end, or (``drop_last``) its
    last items cut off.

    >>> pad_or_drop(np.arange(3), 4, drop_last=False).tolist()
    [0, 1, 2, 0]
    """
    need = even_count(len(order), parts, drop_last=drop_last)
    return order[wrapped(np.arange(need), len(order))] if need > len(order) else order[:need]
