"""shardstream: WebDataset-compatible tar shards for deep learning."""

from . import errors
from . import gopen as _gopen_module  # noqa: F401 - `shardstream.gopen` the module is loaded first, then...
from .config import Settings, get_settings
from .errors import *  # noqa: F401,F403  (the exception tree is public API)
from .io import gopen  # ...`shardstream.gopen` the function, as in webdataset
from .logs import apply_settings as _apply_log_settings

_apply_log_settings()  # SHARDSTREAM_VERBOSE=1: the shardstream logger at INFO, on stderr (see shardstream.logs)

__version__ = "0.1.0"

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


def __getattr__(name: str):  # noqa: ANN202 - module __getattr__ (PEP 562)
    import importlib

    if name in _PIPELINE_NAMES:
        value = getattr(importlib.import_module(_PIPELINE_NAMES[name]), name)
    elif name in _PIPELINE_MODULES:
        value = importlib.import_module(_PIPELINE_MODULES[name])
    elif name in _OBSOLETE:
        raise errors.ObsoleteNameError(f"shardstream.{name} is webdataset's old API; use {_OBSOLETE[name]}")
    else:
        raise AttributeError(f"module 'shardstream' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PIPELINE_NAMES, *_PIPELINE_MODULES})


if "__all__" in globals():
    __all__ = sorted({*__all__, *_PIPELINE_NAMES})  # noqa: F405,PLE0605
# --- end pipeline API ---
