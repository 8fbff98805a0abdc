"""Training semantics: uniform shuffling in bounded memory, determinism, exact epochs across ranks, mid-epoch and
elastic resume. See ``docs/training.md`` for the mechanism and the measurements.

- :class:`TrainingDataset`: batches of one rank, from indexed shards (``shuffle="global"`` by default: a uniform
  permutation of all samples, read by random access) or streamed shards (``shuffle="stream"``).
- :class:`TrainingLoader`: torch's DataLoader over it, with ``set_epoch``, ``state_dict`` and ``load_state_dict``.
- :class:`EpochPlan`, :class:`SampleOrder`, :class:`StreamOrder`, :class:`Permutation`: the pure functions
  behind them (which sample each rank serves in each batch of each epoch).
- :func:`batch_diversity`, :func:`rank_correlation`: the shuffle-quality measures of the docs and benchmarks.

>>> from shardstream.writer import ShardWriter
>>> with ShardWriter("data-%02d.tar", maxcount=50) as sink:
...     for i in range(100):
...         _ = sink.write({"__key__": f"s{i:03d}", "cls": i})
>>> ranks = [TrainingDataset("data-{00..01}.tar", batch_size=10, rank=r, world_size=2, decode=True)
...          for r in range(2)]
>>> seen = [[int(c) for batch in ds for c in batch["cls"]] for ds in ranks]
>>> [len(s) for s in seen], sorted(seen[0] + seen[1]) == list(range(100))
([50, 50], True)
"""

from ..order import Permutation, SampleOrder, StreamOrder
from ..runtime import derive_key
from .dataset import TrainingDataset
from .loader import TrainingLoader
from .plan import EpochPlan
from .quality import batch_diversity, rank_correlation

__all__ = [
    "EpochPlan",
    "Permutation",
    "SampleOrder",
    "StreamOrder",
    "TrainingDataset",
    "TrainingLoader",
    "batch_diversity",
    "derive_key",
    "rank_correlation",
]
