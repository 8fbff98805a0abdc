"""shardstream: WebDataset-compatible tar shards for deep learning.

The public names are those in ``__all__`` (pinned by tests/test_public_api.py). The exceptions and the settings
load with the package; the reading API (``import shardstream as wds``) loads on first use.

>>> import shardstream as wds
>>> "WebDataset" in wds.__all__ and wds.StateError.__mro__[1] is wds.ConfigError
True
"""

import importlib as _importlib
import typing as _typing

from . import (
    errors,
    gopen as _gopen_module,  # noqa: F401 - `shardstream.gopen` the module is loaded first, then...
)
from .config import Settings, get_settings
from .errors import (
    ConfigError,
    DecodeError,
    DecodeLimitError,
    DecodingError,
    DuplicateFieldError,
    EncodeError,
    InterleavedKeyError,
    MissingDependencyError,
    MissingExtensionError,
    MissingPartnerError,
    ObsoleteNameError,
    OpenError,
    ProcessingError,
    RecordFormatError,
    ReservedFieldError,
    SampleFormatError,
    ShardError,
    ShardstreamError,
    StaleIndexError,
    StateError,
    TarFormatError,
    UnsafeDecodeError,
    UnsafeURLError,
    WorkerSplitError,
    WriteError,
    add_context,
)
from .io import gopen  # ...`shardstream.gopen` the function, as in webdataset
from .logs import apply_settings as _apply_log_settings

_apply_log_settings()  # SHARDSTREAM_VERBOSE=1: the shardstream logger at INFO, on stderr (see shardstream.logs)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataPipeline",
    "DecodeError",
    "DecodeLimitError",
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
    "MissingPartnerError",
    "ObsoleteNameError",
    "OpenError",
    "ProcessingError",
    "Processor",
    "RandomMix",
    "RecordFormatError",
    "ResampledShards",
    "ReservedFieldError",
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
    "UnsafeURLError",
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
        "DataPipeline ExactMix FluidInterface MockDataset RandomMix ResampledShards RoundRobin SimpleShardList Stage batched braceexpand decode "
        "default_collation_fn detshuffle expand_urls extract_keys getfirst group_by_keys ignore_and_continue "
        "ignore_and_stop listed map map_dict map_tuple pipelinefilter rename rename_keys repeat reraise_exception "
        "rsample select shuffle single_node_only slice split_by_node split_by_worker tar_file_expander "
        "tarfile_samples tarfile_to_samples to_tuple unbatched unlisted url_opener warn_and_continue warn_and_stop "
        "with_epoch with_length cbors_to_samples jsonl_to_samples msgpack_to_samples records_to_samples"
    ),
    "shardstream.dataset": "WebDataset FluidWrapper",
    "shardstream.loader": "WebLoader",
    "shardstream.compat": "Processor",
    "shardstream.io": "gopen",
    "shardstream.writer": "TarWriter ShardWriter",
    "shardstream.codecs": (
        "Continue Decoder gzfilter handle_extension imagehandler torch_video torch_audio torch_loads numpy_dumps "
        "torch_dumps"
    ),
    # webdataset 1.0.2's other top-level names, from the modules that carry webdataset's module paths
    "shardstream.autodecode": "pytorch_weights_only",
    "shardstream.cache": "LRUCleanup pipe_cleaner",
    "shardstream.filters": "Cached LMDBCached associate info transform_with xdecode",
    "shardstream.gopen": "gopen_schemes",
    "shardstream.shardlists": "MultiShardSample non_empty resampled shardspec",
    "shardstream.utils": "PipelineStage repeatedly",
    "shardstream.training": "TrainingDataset TrainingLoader",
    "shardstream.indexed": (
        "IndexedDataset LocalitySampler DistributedLocalitySampler index_shard index_dataset write_dali_index "
        "indexed_shard_writer"
    ),
}
#: webdataset's submodules (`wds.handlers.warn_and_continue`, `from shardstream.cache import FileCache`)
_PIPELINE_MODULES = {
    name: f"shardstream.{name}"
    for name in "autodecode cache filters handlers mix shardlists tariterators tenbin utils writer".split()
}
#: names of older webdataset versions (blog posts, old READMEs) -> what to use now
_OBSOLETE = {
    "ShardList": "wds.SimpleShardList(urls), or wds.WebDataset(urls) to go from shards to samples",
    "Dataset": "wds.WebDataset(urls)",
    "MultiDataset": "wds.WebLoader(dataset, num_workers=N) (or torch.utils.data.DataLoader)",
    "ChoppedDataset": "dataset.with_epoch(n)",
    "ResizedDataset": "dataset.with_epoch(n)",
    "PytorchShardList": "wds.SimpleShardList(urls) with wds.split_by_node / wds.split_by_worker",
    "cbors_to_samples": "a private fork's reader: store .cbor fields in tar shards, read them with "
    "wds.WebDataset(urls).decode()",
}
_PIPELINE_NAMES = {name: module for module, names in _PIPELINE_API.items() for name in names.split()}


def __getattr__(name: str) -> object:
    """Load a name of the reading API, or one of webdataset's submodule names, on first use (PEP 562)."""
    if name in _PIPELINE_NAMES:
        value = getattr(_importlib.import_module(_PIPELINE_NAMES[name]), name)
    elif name in _PIPELINE_MODULES:
        value = _importlib.import_module(_PIPELINE_MODULES[name])
    elif name in _OBSOLETE:
        raise errors.ObsoleteNameError(f"shardstream.{name} is webdataset's old API; use {_OBSOLETE[name]}")
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
