"""Epoch orders as pure functions of ``(seed, epoch, sizes)``: one package for every shuffle.

- :class:`Permutation`: a keyed bijection of ``range(n)``, computed position by position in O(1) memory;
- :class:`SampleOrder`: random-access orders (``"global"``, ``"window"``, ``"none"``), used by
  :class:`~shardstream.training.TrainingDataset` and by the samplers of :mod:`shardstream.indexed`;
- :class:`StreamOrder`: the order of shards read front to back (``"stream"``), blocks of a shuffle buffer;
- :data:`SHUFFLES`: the names of all of them.

Every key comes from :func:`shardstream.runtime.derive_key`, the package's one seed rule.

>>> SampleOrder((2, 2), seed=0, shuffle="none").all().tolist()
[0, 1, 2, 3]
>>> sorted(SampleOrder((2, 2), seed=0).all().tolist())
[0, 1, 2, 3]
"""

from .orders import SHUFFLES, SampleOrder, StreamOrder
from .permute import Permutation

__all__ = ["SHUFFLES", "Permutation", "SampleOrder", "StreamOrder"]
