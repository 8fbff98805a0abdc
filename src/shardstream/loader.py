"""torch integration: WebLoader (a DataLoader with the fluid interface) and collation.

``WebLoader(dataset, **DataLoader kwargs)`` wraps ``torch.utils.data.DataLoader`` in a
:class:`~shardstream.pipeline.DataPipeline`, so a loader can be re-batched across workers in the main
process: ``WebLoader(ds, batch_size=None, num_workers=4).unbatched().shuffle(1000).batched(64)``. torch is
imported only when a WebLoader is made; without torch it raises
:class:`~shardstream.errors.MissingDependencyError`.

Resuming: ``loader.state_dict()`` / ``load_state_dict()`` save and restore where the loader is, so a framework
that checkpoints every loader offering them (PyTorch Lightning, torchdata's Stateful protocol) can always do so:

- ``num_workers=0``: the dataset's own state (the position inside the current shards; nothing is read again);
- ``num_workers > 0``: the number of batches handed out this epoch; restoring iterates the DataLoader again up to
  there (exact, since shardstream's orders are a function of seed and epoch, but the consumed part is read again);
- ``WebLoader(..., stateful=True)``: torchdata's ``StatefulDataLoader`` (``pip install torchdata``) saves each
  worker's pipeline state: exact, without reading again.

Stages after the loader must keep nothing between items (map, batched, ...): a ``.shuffle()`` there holds items
the loader cannot give back, and ``state_dict()`` says so. For exact resume with workers that reads nothing
again, and restores with other numbers of ranks or workers, see :class:`shardstream.training.TrainingLoader`.

``len(loader)``: the DataLoader's batches, when its dataset has a length (``.with_length(n)``, a
:class:`~shardstream.training.TrainingDataset`) and the count does not depend on how the workers share the
samples; for a :class:`~shardstream.WebDataset` over indexed shards, from each worker's samples (every worker
ends its own batches: exact with any ``num_workers``); or the ``n`` of a ``.with_length(n)`` on the loader itself.

Epochs: each ``iter()`` of a WebLoader is the next epoch (or the one given to ``set_epoch``), and the loader
hands that epoch to its dataset before the DataLoader copies the dataset into the workers, so shard and sample
orders change every epoch and are reproducible from ``(seed, epoch)``. An epoch set on the dataset itself with
``dataset.set_epoch(n)`` is left alone.

>>> import shardstream as wds
>>> loader = wds.WebLoader(wds.DataPipeline(range(10), wds.batched(4)), batch_size=None, num_workers=0)
>>> [b.tolist() for b in loader.unbatched().batched(5)]
[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .errors import MissingDependencyError
from .pipeline import DataPipeline, FluidInterface, default_collation_fn

__all__ = ["FluidInterface", "WebLoader", "default_collation_fn"]


def _dataloader_class(stateful: bool = False) -> type:
    try:
        from torch.utils.data import DataLoader  # noqa: PLC0415 - optional: shardstream[torch]
    except ImportError as e:
        raise MissingDependencyError("WebLoader (torch's DataLoader)", "torch", "torch") from e
    if not stateful:
        return DataLoader
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: PLC0415 - optional: shardstream[torchdata]
    except ImportError as e:
        raise MissingDependencyError("WebLoader(stateful=True) (torchdata's StatefulDataLoader)", "torchdata",
                                     "torchdata") from e
    return StatefulDataLoader


class WebLoader(DataPipeline):
    """``torch.utils.data.DataLoader(*args, **kwargs)`` as the source of a fluid pipeline (see module doc);
    ``stateful=True``: torchdata's ``StatefulDataLoader`` instead (resumable with workers)."""

    def __init__(self, *args: Any, stateful: bool = False, **kwargs: Any):
        loader = _dataloader_class(stateful)(*args, **kwargs)
        super().__init__(loader)
        self.loader = loader

    @property
    def dataset(self) -> Any:
        """The dataset the DataLoader reads."""
        return self.loader.dataset

    def set_epoch(self, epoch: int, *, source: str = "user") -> None:
        """Make the next iteration epoch ``epoch``, for this loader and its dataset."""
        super().set_epoch(epoch, source=source)
        self._push_epoch(epoch, force=True)

    def _push_epoch(self, epoch: int, force: bool = False) -> None:
        """Hand ``epoch`` to the dataset before the DataLoader copies it into the workers: always after this
        loader's ``set_epoch``, else unless the user set the dataset's own epoch."""
        dataset = self.dataset
        if not isinstance(dataset, DataPipeline):
            if force and callable(getattr(dataset, "set_epoch", None)):
                dataset.set_epoch(epoch)
            return
        if force or dataset.epoch_source != "user":
            dataset.set_epoch(epoch, source="loader")

    def __iter__(self) -> Iterator[Any]:
        self._push_epoch(self.epoch)
        return super().__iter__()

    def _worker_batches(self) -> int | None:
        """The batches of the next epoch from the dataset's per-worker counts (``worker_lengths``: a WebDataset
        over indexed shards), each worker ending its own batches as the DataLoader does; None when not known."""
        lengths, loader = getattr(self.dataset, "worker_lengths", None), self.loader
        if not callable(lengths):
            return None
        dataset = self.dataset
        epoch = dataset.epoch if getattr(dataset, "epoch_source", None) == "user" else self.epoch
        try:
            counts = lengths(max(1, loader.num_workers), epoch=epoch)
        except TypeError:
            return None
        size = loader.batch_size
        if size is None:
            return sum(counts)
        return sum(c // size if loader.drop_last else -(-c // size) for c in counts)

    def __len__(self) -> int:
        """Batches of one epoch (see the module docstring); a ``TypeError`` says why when they are not known.

        >>> import shardstream as wds
        >>> len(wds.WebLoader(wds.DataPipeline(range(10)).with_length(10), batch_size=4))
        3
        """
        if len(self.pipeline) > 1:
            return super().__len__()  # stages after the loader: only a declared length counts
        loader = self.loader
        counted = self._worker_batches()
        if counted is not None:
            return counted
        if loader.num_workers > 1 and loader.batch_size is not None:
            raise TypeError(
                f"this WebLoader's length is not known: {loader.num_workers} workers each end with a partial batch "
                "of their share of the samples; batch in the dataset (.batched(n) and batch_size=None) with "
                ".with_length(batches), or declare the loader's own length with .with_length(n)")
        try:
            return len(loader)
        except TypeError as e:
            raise TypeError(f"this WebLoader's dataset has no length ({e}); declare one with .with_length(n) on "
                            "the dataset or the loader") from None
