"""Pseudo-random permutations of ``range(n)`` computed position by position, in O(1) memory.

A global shuffle of a dataset does not need the shuffled list of all its sample numbers: :class:`Permutation`
computes ``perm(p)``, the sample at position ``p``, for any batch of positions at once (numpy, vectorised). It
is a keyed (unbalanced) Feistel network over the smallest power of two ``>= n`` (six rounds of the splitmix64
mixer), with *cycle walking* (a value that lands outside ``range(n)`` is encrypted again: fewer than two rounds on
average, the domain being less than ``2n``), so it is a bijection of ``range(n)``: every position maps to a
distinct sample. Grain's ``index_shuffle`` works the same way.

Consequences used by :mod:`shardstream.training`: the shuffle costs no memory whatever the dataset size, any
position of an epoch is computed in constant time (resuming at 90% of an epoch costs what resuming at 10% does),
and the permutation depends only on its key, derived with :func:`~shardstream.runtime.derive_key` from ``(seed, epoch, ...)`` by
BLAKE2b: no global random state, time or process id is involved.

>>> perm = Permutation(10, derive_key("example", 0))
>>> order = perm(range(10)).tolist()
>>> sorted(order) == list(range(10)), order == Permutation(10, derive_key("example", 0))(range(10)).tolist()
(True, True)
>>> perm([3, 7]).tolist() == [order[3], order[7]]
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from .. import _native
from ..errors import ConfigError
from ..runtime import derive_key
from ..tar.reader import accelerated

__all__ = ["Permutation", "derive_key"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
ROUNDS = 6


def position_permuter() -> Callable[[int, np.ndarray, np.ndarray, np.ndarray], None] | None:
    """The C twin of :meth:`Permutation.__call__` (``permute_positions(n, rounds, positions, out)``, which writes
    ``out[i] = perm(positions[i])`` from the rounds of ``Permutation._table``) when the accelerator is on
    (:func:`~shardstream.tar.accelerated`) and the extension has it; else None. The order layer's one way to the
    extension (:mod:`shardstream._native`).

    >>> position_permuter() is None or callable(position_permuter())
    True
    """
    return getattr(_native.extension, "permute_positions", None) if accelerated() else None


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping multiplication)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


class Permutation:
    """A keyed bijection of ``range(n)``: ``perm(positions) -> samples`` (int64 arrays).

    :param n: the size of the permuted range (``n <= 2**62``)
    :param key: any integer (see :func:`derive_key`); the same key gives the same permutation everywhere

    >>> p = Permutation(1000, 7)
    >>> len(set(p(range(1000)).tolist())), p(range(1000)).tolist() != list(range(1000))
    (1000, True)
    >>> Permutation(1, 7)([0]).tolist(), Permutation(0, 7)([]).tolist()
    ([0], [])
    """

    __slots__ = ("n", "key", "_rounds", "_table")

    def __init__(self, n: int, key: int):
        if n < 0 or n > 1 << 62:
            raise ConfigError(f"a permutation needs 0 <= n <= 2**62, got {n}")
        self.n, self.key = int(n), int(key)
        bits = max(2, (self.n - 1).bit_length())
        left, right = bits // 2, bits - bits // 2  # the halves swap sizes at every round (6 rounds: back)
        round_keys = _mix(np.arange(ROUNDS, dtype=np.uint64) + np.uint64(self.key & (2**64 - 1))).tolist()
        self._rounds = []
        for k in round_keys:
            self._rounds.append((np.uint64(right), np.uint64((1 << right) - 1), np.uint64((1 << left) - 1),
                                 np.uint64(left), np.uint64(k)))
            left, right = right, left
        self._table = np.array(self._rounds, dtype=np.uint64)  # the rounds for the C twin (one row each)

    def __call__(self, positions: Iterable[int] | np.ndarray) -> np.ndarray:
        """The samples at ``positions`` (each in ``range(n)``)."""
        where = np.atleast_1d(np.asarray(positions if isinstance(positions, np.ndarray) else list(positions),
                                         dtype=np.int64))
        if where.size == 0:
            return where
        if self.n <= 1 or where.min() < 0 or where.max() >= self.n:
            if where.min() < 0 or where.max() >= self.n:
                raise IndexError(f"positions must lie in range({self.n}), got {where.min()}..{where.max()}")
            return where.copy()
        permute = position_permuter()
        if permute is not None:  # the same values, computed in C
            out = np.empty(where.shape, dtype=np.int64)
            permute(self.n, self._table, np.ascontiguousarray(where, dtype=np.int64), out)
            return out
        out = self._encrypt(where.astype(np.uint64))
        outside = np.flatnonzero(out >= np.uint64(self.n))
        while outside.size:  # cycle walking: at most a few rounds, the domain is < 4n
            again = self._encrypt(out[outside])
            out[outside] = again
            outside = outside[again >= np.uint64(self.n)]
        return out.astype(np.int64)

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        for right_bits, right_mask, left_mask, left_bits, k in self._rounds:
            left, right = x >> right_bits, x & right_mask
            x = (right << left_bits) | (left ^ (_mix(right ^ k) & left_mask))  # (R, L ^ F(R)): a bijection
        return x

    def __repr__(self) -> str:
        return f"Permutation(n={self.n}, key={self.key})"
