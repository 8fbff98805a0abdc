"""shardstream: WebDataset-compatible tar shards for deep learning."""

from . import errors
from .config import Settings, get_settings
from .errors import *  # noqa: F401,F403  (the exception tree is public API)
from .logs import apply_settings as _apply_log_settings

_apply_log_settings()  # SHARDSTREAM_VERBOSE=1: the shardstream logger at INFO, on stderr (see shardstream.logs)

__version__ = "0.1.0"

# --- pipeline API ---
# The webdataset-compatible reading API (`import shardstream as wds`). Loaded on first use so that
# `import shardstream` stays light: the pipeline imports torch (when installed) to subclass IterableDataset.
_PIPELINE_API = {
    "shardstream.pipeline": (
        "DataPipeline ExactMix FluidInterface RandomMix ResampledShards RoundRobin SimpleShardList Stage batched braceexpand decode "
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


def __getattr__(name: str):  # noqa: ANN202 - module __getattr__ (PEP 562)
    import importlib

    if name in _PIPELINE_NAMES:
        value = getattr(importlib.import_module(_PIPELINE_NAMES[name]), name)
    elif name in _PIPELINE_MODULES:
        value = importlib.import_module(_PIPELINE_MODULES[name])
    else:
        raise AttributeError(f"module 'shardstream' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PIPELINE_NAMES, *_PIPELINE_MODULES})


if "__all__" in globals():
    __all__ = sorted({*__all__, *_PIPELINE_NAMES})  # noqa: F405,PLE0605
# --- end pipeline API ---
