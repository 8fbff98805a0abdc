"""Moved to :mod:`shardstream.order.orders`; re-exported here.

>>> from shardstream.order import SampleOrder as S
>>> SampleOrder is S
True
"""

from ..order.orders import SHUFFLES, SampleOrder, StreamOrder

__all__ = ["SHUFFLES", "SampleOrder", "StreamOrder"]
