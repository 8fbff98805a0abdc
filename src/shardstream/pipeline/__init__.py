"""Streaming pipelines: the engine (core, cursors, iteration), the recipe (:class:`DataPipeline`), shard
lists, and the stage families under :mod:`.stages` (one module each).

Every stage is declared once with :func:`~shardstream.pipeline.core.stage`; that declaration gives both the
pipeline form (``map(f)``, used in :class:`DataPipeline`) and the fluid method (``dataset.map(f)``).

>>> pipeline = DataPipeline(range(10), shuffle(5), select(lambda x: x % 2 == 0), batched(3))
>>> [b.shape for b in pipeline]
[(3,), (2,)]
>>> sorted(x for b in pipeline for x in b.tolist())
[0, 2, 4, 6, 8]
>>> pipeline.set_epoch(0); first = [b.tolist() for b in pipeline]
>>> pipeline.set_epoch(0); first == [b.tolist() for b in pipeline]
True
"""

from ..runtime import Placement
from . import error_handlers as handlers  # its name in __all__
from .context import Context, Source
from .core import REGISTRY, FluidInterface, Stage, StageSpec, pipelinefilter, stage
from .datapipeline import DataPipeline, IterableDatasetBase
from .error_handlers import ignore_and_continue, ignore_and_stop, reraise_exception, warn_and_continue, warn_and_stop
from .shardlists import MockDataset, ResampledShards, SimpleShardList, braceexpand, expand_urls
from .stages.batching import batched, default_collation_fn, listed, unbatched, unlisted
from .stages.epochs import repeat, with_epoch, with_length
from .stages.exactmix import ExactMix
from .stages.extras import Cached, LMDBCached, PipelineStage, log_keys, xdecode
from .stages.fields import extract_keys, rename, rename_keys
from .stages.mix import RandomMix, RoundRobin
from .stages.parallel import parallel_map, tarfile_to_columns
from .stages.per_sample import decode, getfirst, map, map_dict, map_tuple, select, to_tuple
from .stages.reading import group_by_keys, tar_file_expander, tarfile_samples, tarfile_to_samples, url_opener
from .stages.records import cbors_to_samples, jsonl_to_samples, msgpack_to_samples, records_to_samples
from .stages.sampling import rsample, slice
from .stages.shuffle import detshuffle, shuffle
from .stages.split import as_splitter, check_empty, single_node_only, split_by_node, split_by_worker

__all__ = [
    "Cached",
    "Context",
    "DataPipeline",
    "ExactMix",
    "FluidInterface",
    "IterableDatasetBase",
    "LMDBCached",
    "MockDataset",
    "PipelineStage",
    "Placement",
    "REGISTRY",
    "RandomMix",
    "ResampledShards",
    "RoundRobin",
    "SimpleShardList",
    "Source",
    "Stage",
    "StageSpec",
    "as_splitter",
    "batched",
    "braceexpand",
    "cbors_to_samples",
    "check_empty",
    "decode",
    "default_collation_fn",
    "detshuffle",
    "expand_urls",
    "extract_keys",
    "getfirst",
    "group_by_keys",
    "handlers",
    "ignore_and_continue",
    "ignore_and_stop",
    "jsonl_to_samples",
    "listed",
    "log_keys",
    "map",
    "map_dict",
    "map_tuple",
    "msgpack_to_samples",
    "parallel_map",
    "pipelinefilter",
    "records_to_samples",
    "rename",
    "rename_keys",
    "repeat",
    "reraise_exception",
    "rsample",
    "select",
    "shuffle",
    "single_node_only",
    "slice",
    "split_by_node",
    "split_by_worker",
    "stage",
    "tar_file_expander",
    "tarfile_samples",
    "tarfile_to_columns",
    "tarfile_to_samples",
    "to_tuple",
    "unbatched",
    "unlisted",
    "url_opener",
    "warn_and_continue",
    "warn_and_stop",
    "with_epoch",
    "with_length",
    "xdecode",
]
