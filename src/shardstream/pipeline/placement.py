"""Where this iteration runs: moved to :mod:`shardstream.runtime` (this module re-exports it).

>>> from shardstream.runtime import Placement as P
>>> Placement is P
True
"""

from __future__ import annotations

from ..runtime import Placement, distributed_rank, worker_info

__all__ = ["Placement", "distributed_rank", "worker_info"]
