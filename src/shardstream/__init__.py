"""shardstream: WebDataset-compatible tar shards for deep learning.

The public names are those in ``__all__`` (pinned by tests/test_public_api.py). The exceptions and the settings
load with the package; the reading API (``import shardstream as wds``) loads on first use.

>>> import shardstream as wds
>>> "WebDataset" in wds.__all__ and wds.StateError.__mro__[1] is wds.ConfigError
True
"""

import importlib as _importlib
import typing as _typing

from .config import Settings, get_settings
from .errors import (
    ConfigError,
    DecodeError,
    DecodingError,
    DuplicateFieldError,
    EncodeError,
    InterleavedKeyError,
    MissingDependencyError,
    MissingExtensionError,
    OpenError,
    ProcessingError,
    RecordFormatError,
    SampleFormatError,
    ShardError,
    ShardstreamError,
    StaleIndexError,
    StateError,
    TarFormatError,
    UnsafeDecodeError,
    WorkerSplitError,
    WriteError,
    add_context,
)
from .logs import apply_settings as _apply_log_settings

_apply_log_settings()  # SHARDSTREAM_VERBOSE=1: the shardstream logger at INFO, on stderr (see shardstream.logs)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataPipeline",
    "DecodeError",
    "Decoder",
    "DecodingError",
    "DistributedLocalitySampler",
    "DuplicateFieldError",
    "EncodeError",
    "FluidInterface",
    "FluidWrapper",
    "IndexedDataset",
    "InterleavedKeyError",
    "LocalitySampler",
    "MissingDependencyError",
    "MissingExtensionError",
    "OpenError",
    "ProcessingError",
    "Processor",
    "RandomMix",
    "RecordFormatError",
    "ResampledShards",
    "RoundRobin",
    "SampleFormatError",
    "Settings",
    "ShardError",
    "ShardWriter",
    "ShardstreamError",
    "SimpleShardList",
    "Stage",
    "StaleIndexError",
    "StateError",
    "TarFormatError",
    "TarWriter",
    "TrainingDataset",
    "TrainingLoader",
    "UnsafeDecodeError",
    "WebDataset",
    "WebLoader",
    "WorkerSplitError",
    "WriteError",
    "add_context",
    "batched",
    "braceexpand",
    "decode",
    "default_collation_fn",
    "detshuffle",
    "expand_urls",
    "extract_keys",
    "get_settings",
    "getfirst",
    "gopen",
    "group_by_keys",
    "handle_extension",
    "ignore_and_continue",
    "ignore_and_stop",
    "imagehandler",
    "index_dataset",
    "index_shard",
    "indexed_shard_writer",
    "listed",
    "map",
    "map_dict",
    "map_tuple",
    "numpy_dumps",
    "pipelinefilter",
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
    "tar_file_expander",
    "tarfile_samples",
    "tarfile_to_samples",
    "to_tuple",
    "torch_audio",
    "torch_dumps",
    "torch_video",
    "unbatched",
    "unlisted",
    "url_opener",
    "warn_and_continue",
    "warn_and_stop",
    "with_epoch",
    "with_length",
    "write_dali_index",
]

# --- pipeline API ---
# The webdataset-compatible reading API (`import shardstream as wds`). Loaded on first use so that
# `import shardstream` stays light: the pipeline imports torch (when installed) to subclass IterableDataset.
_PIPELINE_API = {
    "shardstream.pipeline": (
        "DataPipeline FluidInterface RandomMix ResampledShards RoundRobin SimpleShardList Stage batched braceexpand decode "
        "default_collation_fn detshuffle expand_urls extract_keys getfirst group_by_keys ignore_and_continue "
        "ignore_and_stop listed map map_dict map_tuple pipelinefilter rename rename_keys repeat reraise_exception "
        "rsample select shuffle single_node_only slice split_by_node split_by_worker tar_file_expander "
        "tarfile_samples tarfile_to_samples to_tuple unbatched unlisted url_opener warn_and_continue warn_and_stop "
        "with_epoch with_length"
    ),
    "shardstream.dataset": "WebDataset FluidWrapper",
    "shardstream.loader": "WebLoader",
    "shardstream.compat": "Processor",
    "shardstream.io": "gopen",
    "shardstream.writer": "TarWriter ShardWriter",
    "shardstream.codecs": "Decoder handle_extension imagehandler torch_video torch_audio numpy_dumps torch_dumps",
    "shardstream.training": "TrainingDataset TrainingLoader",
    "shardstream.indexed": (
        "IndexedDataset LocalitySampler DistributedLocalitySampler index_shard index_dataset write_dali_index "
        "indexed_shard_writer"
    ),
}
#: webdataset's submodule names, for code that spells `wds.handlers.warn_and_continue` or `wds.filters.map`
_PIPELINE_MODULES = {
    "filters": "shardstream.pipeline",
    "handlers": "shardstream.pipeline.handlers",
    "shardlists": "shardstream.pipeline.shardlists",
    "tariterators": "shardstream.pipeline.stages.reading",
}
_PIPELINE_NAMES = {name: module for module, names in _PIPELINE_API.items() for name in names.split()}


def __getattr__(name: str) -> object:
    """Load a name of the reading API, or one of webdataset's submodule names, on first use (PEP 562)."""
    if name in _PIPELINE_NAMES:
        value = getattr(_importlib.import_module(_PIPELINE_NAMES[name]), name)
    elif name in _PIPELINE_MODULES:
        value = _importlib.import_module(_PIPELINE_MODULES[name])
    else:
        raise AttributeError(f"module 'shardstream' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``), webdataset's submodule names, and the module's own dunder names."""
    return sorted({*__all__, *_PIPELINE_MODULES, *(name for name in globals() if name.startswith("__"))})


if _typing.TYPE_CHECKING:  # the lazily loaded names as type checkers and IDEs see them (the table above: runtime)
    from . import pipeline as filters  # noqa: F401 - webdataset's name for the module (not in __all__)
    from .codecs import Decoder, handle_extension, imagehandler, numpy_dumps, torch_audio, torch_dumps, torch_video
    from .compat import Processor
    from .dataset import FluidWrapper, WebDataset
    from .indexed import (
        DistributedLocalitySampler,
        IndexedDataset,
        LocalitySampler,
        index_dataset,
        index_shard,
        indexed_shard_writer,
        write_dali_index,
    )
    from .io import gopen
    from .loader import WebLoader
    from .pipeline import (
        DataPipeline,
        FluidInterface,
        RandomMix,
        ResampledShards,
        RoundRobin,
        SimpleShardList,
        Stage,
        batched,
        braceexpand,
        decode,
        default_collation_fn,
        detshuffle,
        expand_urls,
        extract_keys,
        getfirst,
        group_by_keys,
        handlers as handlers,
        ignore_and_continue,
        ignore_and_stop,
        listed,
        map,
        map_dict,
        map_tuple,
        pipelinefilter,
        rename,
        rename_keys,
        repeat,
        reraise_exception,
        rsample,
        select,
        shardlists as shardlists,
        shuffle,
        single_node_only,
        slice,
        split_by_node,
        split_by_worker,
        tar_file_expander,
        tarfile_samples,
        tarfile_to_samples,
        to_tuple,
        unbatched,
        unlisted,
        url_opener,
        warn_and_continue,
        warn_and_stop,
        with_epoch,
        with_length,
    )
    from .pipeline.stages import reading as tariterators  # noqa: F401 - webdataset's name for the module
    from .training import TrainingDataset, TrainingLoader
    from .writer import ShardWriter, TarWriter
# --- end pipeline API ---
