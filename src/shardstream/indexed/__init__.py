"""Random access to WebDataset shards: sidecar indexes, a map-style dataset, locality-aware samplers, DALI export.

- :func:`index_shard` / :func:`indexed_shard_writer` build a shard's sidecar index (scanning headers, or while
  writing); :func:`index_dataset` writes the dataset index (one JSON file for the whole dataset).
- :class:`IndexedDataset`: ``len(ds)``, ``ds[i]``, ``ds.get(key)``, ``ds[a:b]``, decoding with the codec table.
- :class:`LocalitySampler` / :class:`DistributedLocalitySampler`: shuffled orders that read a few shards at a time.
- :func:`write_dali_index`: NVIDIA DALI's webdataset index files (v1.2).
- :class:`ByteSource` / :func:`register_source`: where bytes come from (local memory maps built in).

>>> from shardstream.indexed import IndexedDataset, LocalitySampler, index_dataset, indexed_shard_writer
>>> with indexed_shard_writer("digits-%02d.tar", maxcount=4) as sink:
...     for i in range(10):
...         _ = sink.write({"__key__": f"{i:03d}", "cls": i})
>>> _ = index_dataset(sink.shards, "digits.json")
>>> ds = IndexedDataset("digits.json", decode=True)
>>> sampler = LocalitySampler(ds, window=2, seed=0)
>>> sorted(ds[i]["cls"] for i in sampler) == list(range(10))
True
"""

from typing import TYPE_CHECKING, Any

#: name -> the module of this package that defines it, imported on first use: ``WebDataset`` reads a dataset index
#: (:mod:`.dataset_index`) without loading the random-access reader, the samplers or numpy
_NAMES = {
    "build": "index_from_entries index_shard indexed_shard_writer write_dali_index write_indexes",
    "dataset": "IndexedDataset",
    "dataset_index": "DatasetIndex ShardEntry index_dataset",
    "sampler": "DistributedLocalitySampler LocalitySampler",
    "shardindex": "SIDECAR_SUFFIX ShardIndex fingerprint sidecar_path",
    "source": "ByteSource LocalSource open_source register_source",
}
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names.split()}

if TYPE_CHECKING:
    from .build import index_from_entries, index_shard, indexed_shard_writer, write_dali_index, write_indexes
    from .dataset import IndexedDataset
    from .dataset_index import DatasetIndex, ShardEntry, index_dataset
    from .sampler import DistributedLocalitySampler, LocalitySampler
    from .shardindex import SIDECAR_SUFFIX, ShardIndex, fingerprint, sidecar_path
    from .source import ByteSource, LocalSource, open_source, register_source


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415 - once per name

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))


__all__ = [
    "ByteSource",
    "DatasetIndex",
    "DistributedLocalitySampler",
    "IndexedDataset",
    "LocalSource",
    "LocalitySampler",
    "SIDECAR_SUFFIX",
    "ShardEntry",
    "ShardIndex",
    "fingerprint",
    "index_dataset",
    "index_from_entries",
    "index_shard",
    "indexed_shard_writer",
    "open_source",
    "register_source",
    "sidecar_path",
    "write_dali_index",
    "write_indexes",
]
