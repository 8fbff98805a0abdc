"""Moved to :mod:`shardstream.pipeline.stages.parallel`; re-exported here (the path docs and benchmarks use).

>>> from shardstream.pipeline.stages import parallel
>>> parallel_map is parallel.parallel_map
True
"""

from .stages.parallel import parallel_map, tarfile_to_columns

__all__ = ["parallel_map", "tarfile_to_columns"]
