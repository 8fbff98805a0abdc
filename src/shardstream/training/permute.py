"""Moved to :mod:`shardstream.order.permute` (and :func:`shardstream.runtime.derive_key`); re-exported here.

>>> from shardstream.order import Permutation as P
>>> Permutation is P
True
"""

from ..order.permute import Permutation
from ..runtime import derive_key

__all__ = ["Permutation", "derive_key"]
