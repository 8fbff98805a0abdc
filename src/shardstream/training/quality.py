"""Shuffle quality, measured on the sequence of original sample numbers a reader produced.

- :func:`batch_diversity`: the mean, over consecutive batches, of the number of distinct classes in a batch divided
  by its expectation under i.i.d. sampling (1.0 is as diverse as independent draws; data sorted by class and
  read in order scores about ``1 / expectation``).
- :func:`rank_correlation`: the mean absolute Spearman correlation between output position and original index,
  in consecutive windows (0 is unrelated; 1 is the original order, even locally).

>>> import numpy as np
>>> ordered = np.arange(100_000)
>>> round(rank_correlation(ordered), 2), round(batch_diversity(ordered // 100, num_classes=1000), 2)
(1.0, 0.01)
>>> shuffled = np.random.default_rng(0).permutation(100_000)
>>> rank_correlation(shuffled) < 0.05, batch_diversity(shuffled // 100, num_classes=1000) > 0.97
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["batch_diversity", "expected_distinct", "rank_correlation"]


def expected_distinct(num_classes: int, batch: int) -> float:
    """Expected distinct classes among ``batch`` i.i.d. uniform draws from ``num_classes`` (95.21 for 1000, 100).

    >>> round(expected_distinct(1000, 100), 2)
    95.21
    """
    return num_classes * (1 - (1 - 1 / num_classes) ** batch)


def batch_diversity(classes: Sequence[int] | np.ndarray, *, num_classes: int, batch: int = 100) -> float:
    """Mean distinct classes per batch of ``batch`` consecutive items, over the i.i.d. expectation."""
    labels = np.asarray(classes)
    counts = [len(np.unique(labels[i : i + batch])) for i in range(0, len(labels) - batch + 1, batch)]
    return float(np.mean(counts) / expected_distinct(num_classes, batch))


def _ranks(values: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(len(values))
    return ranks


def rank_correlation(indices: Sequence[int] | np.ndarray, *, window: int = 1000) -> float:
    """Mean |Spearman rho| between position and original index over windows of ``window`` consecutive items."""
    values = np.asarray(indices)
    positions = np.arange(window, dtype=np.float64)
    rhos = []
    for start in range(0, len(values) - window + 1, window):
        ranks = _ranks(values[start : start + window])
        rho = np.corrcoef(positions, ranks)[0, 1]
        rhos.append(abs(rho) if np.isfinite(rho) else 1.0)
    return float(np.mean(rhos))
