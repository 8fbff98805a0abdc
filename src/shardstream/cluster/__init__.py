"""Training batches made on a Dask cluster: :class:`ClusterLoader` (see :mod:`.loader` and ``docs/cluster.md``).

Dask workers read the shards, decode, augment and collate; the trainer only consumes. The batches, their order
and the checkpoints are those of local training (:class:`~shardstream.training.TrainingLoader`, or a DataLoader's
over a pipeline), whatever the size of the cluster. Needs ``pip install 'shardstream[dask]'``.
"""

from __future__ import annotations

from .loader import ClusterLoader

__all__ = ["ClusterLoader"]
