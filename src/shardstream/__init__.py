"""shardstream: WebDataset-compatible tar shards for deep learning.

The public names are those in ``__all__`` (pinned by tests/test_public_api.py). The exceptions load with the
package; the rest (the reading API, ``gopen``, the settings) loads on first use, so that ``import shardstream``
stays light (tests/test_import_cost.py pins what it must not load).

Every top-level name comes from one table, ``_API`` (module -> names): the lazy loading is derived from it here, and
``__all__`` and the static imports type checkers read are generated from it by ``scripts/gen_init_api.py``.

webdataset's module paths (``_WEBDATASET_MODULES``: ``import shardstream.filters`` where webdataset code has
``import webdataset.filters``) are top-level modules too: ``autodecode``, ``cache``, ``filters``, ``gopen``,
``handlers``, ``mix``, ``shardlists``, ``tariterators``, ``tenbin`` and ``utils`` hold webdataset's names over the
floors below them; ``writer`` is shardstream's own package (see README.md in this folder).

>>> import shardstream as wds
>>> "WebDataset" in wds.__all__ and wds.StateError.__mro__[1] is wds.ConfigError
True
"""

import importlib as _importlib
import sys as _sys
import types as _types
import typing as _typing

from .config import verbose_requested as _verbose_requested

__version__ = "0.1.0"

#: THE table of the top-level API: module (under ``shardstream.``) -> the names the package re-exports from it
_API = {
    "errors": (
        "ConfigError DecodeError DecodeLimitError DecodingError DuplicateFieldError EncodeError InterleavedKeyError "
        "MissingDependencyError MissingExtensionError MissingFieldError MissingPartnerError NotATarError ObsoleteNameError "
        "OpenError ProcessingError RecordFormatError ReservedFieldError SampleFormatError ShardError ShardstreamError "
        "StaleIndexError StateError TarFormatError UnbalancedBracesError UnevenSplitError UnsafeDecodeError "
        "UnsafeURLError WorkerSplitError WriteError add_context"
    ),
    "config": "Settings get_settings",
    "io": "gopen",  # `shardstream.gopen` the function, as in webdataset (the module stays importable by its path:
    # `_Package` below keeps the function when `import shardstream.gopen` loads the module)
    "pipeline": (
        "DataPipeline ExactMix FluidInterface MockDataset RandomMix ResampledShards RoundRobin SimpleShardList Stage "
        "batched braceexpand decode default_collation_fn detshuffle expand_urls extract_keys getfirst group_by_keys "
        "ignore_and_continue ignore_and_stop listed map map_dict map_tuple pipelinefilter rename rename_keys repeat "
        "reraise_exception rsample select shuffle single_node_only slice split_by_node split_by_worker "
        "tar_file_expander tarfile_samples tarfile_to_samples to_tuple unbatched unlisted url_opener "
        "warn_and_continue warn_and_stop with_epoch with_length cbors_to_samples jsonl_to_samples "
        "msgpack_to_samples records_to_samples"
    ),
    "dataset": "WebDataset FluidWrapper",
    "loader": "WebLoader",
    "compat": "Processor",
    "writer": "TarWriter ShardWriter",
    "codecs": (
        "Continue Decoder gzfilter handle_extension imagehandler torch_video torch_audio torch_loads numpy_dumps "
        "torch_dumps"
    ),
    # webdataset 1.0.2's other top-level names, from the modules that carry webdataset's module paths
    "autodecode": "pytorch_weights_only",
    "cache": "LRUCleanup pipe_cleaner",
    "filters": "Cached LMDBCached associate info transform_with xdecode",
    "gopen": "gopen_schemes",
    "shardlists": "MultiShardSample non_empty resampled shardspec",
    "utils": "PipelineStage repeatedly",
    "training": "TrainingDataset TrainingLoader",
    "indexed": (
        "IndexedDataset LocalitySampler DistributedLocalitySampler index_shard index_dataset write_dali_index "
        "indexed_shard_writer"
    ),
}
#: the modules of ``_API`` imported with the package (light, and the exceptions are needed at once); the others load
#: on first use so that ``import shardstream`` stays light: the pipeline imports torch (when installed), the settings
#: dataclasses (and with it inspect), the openers urllib and logging
_EAGER = ("errors",)
#: webdataset's module paths: ``import shardstream.X`` works where webdataset code writes ``import webdataset.X``
#: (README.md in this folder; tests/compat walks webdataset's surface through them)
_WEBDATASET_MODULES = (
    "autodecode", "cache", "filters", "gopen", "handlers", "mix", "shardlists", "tariterators", "tenbin", "utils",
    "writer",
)
#: names of older webdataset versions (blog posts, old READMEs) -> what to use now
_OBSOLETE = {
    "ShardList": "wds.SimpleShardList(urls), or wds.WebDataset(urls) to go from shards to samples",
    "Dataset": "wds.WebDataset(urls)",
    "MultiDataset": "wds.WebLoader(dataset, num_workers=N) (or torch.utils.data.DataLoader)",
    "ChoppedDataset": "dataset.with_epoch(n)",
    "ResizedDataset": "dataset.with_epoch(n)",
    "PytorchShardList": "wds.SimpleShardList(urls) with wds.split_by_node / wds.split_by_worker",
}

# --- generated by scripts/gen_init_api.py from _API above: do not edit by hand ---
__all__ = [
    "Cached", "ConfigError", "Continue", "DataPipeline", "DecodeError", "DecodeLimitError", "Decoder", "DecodingError",
    "DistributedLocalitySampler", "DuplicateFieldError", "EncodeError", "ExactMix", "FluidInterface", "FluidWrapper",
    "IndexedDataset", "InterleavedKeyError", "LMDBCached", "LRUCleanup", "LocalitySampler", "MissingDependencyError",
    "MissingExtensionError", "MissingFieldError", "MissingPartnerError", "MockDataset", "MultiShardSample",
    "NotATarError", "ObsoleteNameError", "OpenError", "PipelineStage", "ProcessingError", "Processor", "RandomMix",
    "RecordFormatError", "ResampledShards", "ReservedFieldError", "RoundRobin", "SampleFormatError", "Settings",
    "ShardError", "ShardWriter", "ShardstreamError", "SimpleShardList", "Stage", "StaleIndexError", "StateError",
    "TarFormatError", "TarWriter", "TrainingDataset", "TrainingLoader", "UnbalancedBracesError", "UnevenSplitError",
    "UnsafeDecodeError", "UnsafeURLError", "WebDataset", "WebLoader", "WorkerSplitError", "WriteError", "add_context",
    "associate", "batched", "braceexpand", "cbors_to_samples", "decode", "default_collation_fn", "detshuffle",
    "expand_urls", "extract_keys", "get_settings", "getfirst", "gopen", "gopen_schemes", "group_by_keys", "gzfilter",
    "handle_extension", "ignore_and_continue", "ignore_and_stop", "imagehandler", "index_dataset", "index_shard",
    "indexed_shard_writer", "info", "jsonl_to_samples", "listed", "map", "map_dict", "map_tuple", "msgpack_to_samples",
    "non_empty", "numpy_dumps", "pipe_cleaner", "pipelinefilter", "pytorch_weights_only", "records_to_samples",
    "rename", "rename_keys", "repeat", "repeatedly", "reraise_exception", "resampled", "rsample", "select", "shardspec",
    "shuffle", "single_node_only", "slice", "split_by_node", "split_by_worker", "tar_file_expander", "tarfile_samples",
    "tarfile_to_samples", "to_tuple", "torch_audio", "torch_dumps", "torch_loads", "torch_video", "transform_with",
    "unbatched", "unlisted", "url_opener", "warn_and_continue", "warn_and_stop", "with_epoch", "with_length",
    "write_dali_index", "xdecode",
]

from .errors import (
    ConfigError as ConfigError,
    DecodeError as DecodeError,
    DecodeLimitError as DecodeLimitError,
    DecodingError as DecodingError,
    DuplicateFieldError as DuplicateFieldError,
    EncodeError as EncodeError,
    InterleavedKeyError as InterleavedKeyError,
    MissingDependencyError as MissingDependencyError,
    MissingExtensionError as MissingExtensionError,
    MissingFieldError as MissingFieldError,
    MissingPartnerError as MissingPartnerError,
    NotATarError as NotATarError,
    ObsoleteNameError as ObsoleteNameError,
    OpenError as OpenError,
    ProcessingError as ProcessingError,
    RecordFormatError as RecordFormatError,
    ReservedFieldError as ReservedFieldError,
    SampleFormatError as SampleFormatError,
    ShardError as ShardError,
    ShardstreamError as ShardstreamError,
    StaleIndexError as StaleIndexError,
    StateError as StateError,
    TarFormatError as TarFormatError,
    UnbalancedBracesError as UnbalancedBracesError,
    UnevenSplitError as UnevenSplitError,
    UnsafeDecodeError as UnsafeDecodeError,
    UnsafeURLError as UnsafeURLError,
    WorkerSplitError as WorkerSplitError,
    WriteError as WriteError,
    add_context as add_context,
)

if _typing.TYPE_CHECKING:  # the names loaded on first use, as type checkers see them
    from . import (
        autodecode as autodecode,
        cache as cache,
        filters as filters,
        handlers as handlers,
        mix as mix,
        shardlists as shardlists,
        tariterators as tariterators,
        tenbin as tenbin,
        utils as utils,
        writer as writer,
    )
    from .autodecode import (
        pytorch_weights_only as pytorch_weights_only,
    )
    from .cache import (
        LRUCleanup as LRUCleanup,
        pipe_cleaner as pipe_cleaner,
    )
    from .codecs import (
        Continue as Continue,
        Decoder as Decoder,
        gzfilter as gzfilter,
        handle_extension as handle_extension,
        imagehandler as imagehandler,
        numpy_dumps as numpy_dumps,
        torch_audio as torch_audio,
        torch_dumps as torch_dumps,
        torch_loads as torch_loads,
        torch_video as torch_video,
    )
    from .compat import (
        Processor as Processor,
    )
    from .config import (
        Settings as Settings,
        get_settings as get_settings,
    )
    from .dataset import (
        FluidWrapper as FluidWrapper,
        WebDataset as WebDataset,
    )
    from .filters import (
        Cached as Cached,
        LMDBCached as LMDBCached,
        associate as associate,
        info as info,
        transform_with as transform_with,
        xdecode as xdecode,
    )
    from .gopen import (
        gopen_schemes as gopen_schemes,
    )
    from .indexed import (
        DistributedLocalitySampler as DistributedLocalitySampler,
        IndexedDataset as IndexedDataset,
        LocalitySampler as LocalitySampler,
        index_dataset as index_dataset,
        index_shard as index_shard,
        indexed_shard_writer as indexed_shard_writer,
        write_dali_index as write_dali_index,
    )
    from .io import (
        gopen as gopen,
    )
    from .loader import (
        WebLoader as WebLoader,
    )
    from .pipeline import (
        DataPipeline as DataPipeline,
        ExactMix as ExactMix,
        FluidInterface as FluidInterface,
        MockDataset as MockDataset,
        RandomMix as RandomMix,
        ResampledShards as ResampledShards,
        RoundRobin as RoundRobin,
        SimpleShardList as SimpleShardList,
        Stage as Stage,
        batched as batched,
        braceexpand as braceexpand,
        cbors_to_samples as cbors_to_samples,
        decode as decode,
        default_collation_fn as default_collation_fn,
        detshuffle as detshuffle,
        expand_urls as expand_urls,
        extract_keys as extract_keys,
        getfirst as getfirst,
        group_by_keys as group_by_keys,
        ignore_and_continue as ignore_and_continue,
        ignore_and_stop as ignore_and_stop,
        jsonl_to_samples as jsonl_to_samples,
        listed as listed,
        map as map,
        map_dict as map_dict,
        map_tuple as map_tuple,
        msgpack_to_samples as msgpack_to_samples,
        pipelinefilter as pipelinefilter,
        records_to_samples as records_to_samples,
        rename as rename,
        rename_keys as rename_keys,
        repeat as repeat,
        reraise_exception as reraise_exception,
        rsample as rsample,
        select as select,
        shuffle as shuffle,
        single_node_only as single_node_only,
        slice as slice,
        split_by_node as split_by_node,
        split_by_worker as split_by_worker,
        tar_file_expander as tar_file_expander,
        tarfile_samples as tarfile_samples,
        tarfile_to_samples as tarfile_to_samples,
        to_tuple as to_tuple,
        unbatched as unbatched,
        unlisted as unlisted,
        url_opener as url_opener,
        warn_and_continue as warn_and_continue,
        warn_and_stop as warn_and_stop,
        with_epoch as with_epoch,
        with_length as with_length,
    )
    from .shardlists import (
        MultiShardSample as MultiShardSample,
        non_empty as non_empty,
        resampled as resampled,
        shardspec as shardspec,
    )
    from .training import (
        TrainingDataset as TrainingDataset,
        TrainingLoader as TrainingLoader,
    )
    from .utils import (
        PipelineStage as PipelineStage,
        repeatedly as repeatedly,
    )
    from .writer import (
        ShardWriter as ShardWriter,
        TarWriter as TarWriter,
    )
# --- end of the generated block ---

#: name -> module (under ``shardstream.``) of the names loaded on first use (PEP 562 ``__getattr__`` below)
_PIPELINE_NAMES = {name: module for module, names in _API.items() if module not in _EAGER for name in names.split()}
#: webdataset's module paths as attributes loaded on first use (``wds.handlers.warn_and_continue``), but for a name
#: of ``__all__`` (``wds.gopen`` is the function, as in webdataset). Modules, so not in ``__all__``.
_PIPELINE_MODULES = {name: f"shardstream.{name}" for name in sorted(set(_WEBDATASET_MODULES).difference(__all__))}

if _verbose_requested():  # SHARDSTREAM_VERBOSE=1: the shardstream logger at INFO, on stderr (see shardstream.logs)
    from .logs import apply_settings as _apply_log_settings

    _apply_log_settings()


class _Package(_types.ModuleType):
    """The package's module type. Importing a submodule binds it to the package's attribute of its name; for
    ``import shardstream.gopen`` (webdataset's module path) the attribute stays the function ``gopen``, as
    ``webdataset.gopen`` is (the module is ``sys.modules["shardstream.gopen"]``)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "gopen" and isinstance(value, _types.ModuleType) and value.__name__ == "shardstream.gopen":
            value = value.gopen
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> object:
    """Load a name of the reading API, one of webdataset's submodule names, or a module of the package
    (``shardstream.io``, ``shardstream.training``...) on first use (PEP 562)."""
    if name in _PIPELINE_NAMES:
        value = getattr(_importlib.import_module(f"shardstream.{_PIPELINE_NAMES[name]}"), name)
    elif name in _PIPELINE_MODULES:
        value = _importlib.import_module(_PIPELINE_MODULES[name])
    elif name in _OBSOLETE:
        raise ObsoleteNameError(f"shardstream.{name} is webdataset's old API; use {_OBSOLETE[name]}")
    else:  # a subpackage or module of the package (``shardstream.io``, ``shardstream.training``), loaded as ``import`` would load it
        if name.startswith("_"):
            raise AttributeError(f"module 'shardstream' has no attribute {name!r}")
        try:
            value = _importlib.import_module(f"shardstream.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"shardstream.{name}":
                raise
            raise AttributeError(f"module 'shardstream' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``), webdataset's submodule names, and the module's own dunder names."""
    return sorted({*__all__, *_PIPELINE_MODULES, *(name for name in globals() if name.startswith("__"))})
