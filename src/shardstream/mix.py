"""webdataset's ``mix`` module: interleaving datasets (:class:`RandomMix`, :class:`RoundRobin`).

The generator forms iterate the same mixers once:

>>> list(round_robin_shortest([1, 2, 3], ["a", "b"]))
[1, 'a', 2, 'b', 3]
>>> list(round_robin_longest([1, 2, 3], ["a"]))
[1, 'a', 2, 3]
>>> sorted(random_samples([[1, 2], [3]], [1, 1], longest=True))
[1, 2, 3]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .pipeline import IterableDatasetBase as IterableDataset, RandomMix, RoundRobin

__all__ = ["IterableDataset", "RandomMix", "RoundRobin", "random_samples", "round_robin_longest",
           "round_robin_shortest"]


def round_robin_shortest(*sources: Iterable[Any]) -> Iterator[Any]:
    """One item of each source in turn, until one ends (``RoundRobin(sources)``)."""
    return iter(RoundRobin(list(sources)))


def round_robin_longest(*sources: Iterable[Any]) -> Iterator[Any]:
    """One item of each source in turn, skipping ended sources, until all end."""
    return iter(RoundRobin(list(sources), longest=True))


def random_samples(sources: Sequence[Iterable[Any]], probs: Sequence[float] | None = None,
                   longest: bool = False) -> Iterator[Any]:
    """Items from randomly chosen sources (weights ``probs``), until one ends (all with ``longest=True``)."""
    return iter(RandomMix(list(sources), probs, longest))
