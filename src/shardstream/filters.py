"""webdataset's ``filters`` module: the pipeline stages (shardstream's, from :mod:`shardstream.pipeline`) and
webdataset's helpers around them.

>>> import shardstream as wds
>>> samples = [{"__key__": "a", "txt": b"x"}, {"__key__": "b", "txt": b"y"}]
>>> [s["cls"] for s in associate({"a": {"cls": 1}, "b": {"cls": 2}})(samples)]
[1, 2]
>>> [s["txt"] for s in xdecode()(samples)]
['x', 'y']
>>> compose(lambda x: x + 1, lambda x: 2 * x)(3), transform_with((1, 2), [str, None])
(8, ['1', 2])
>>> cached = Cached(); _ = list(cached(iter([1, 2]))); list(cached(iter([])))
[1, 2]
"""

from __future__ import annotations

import functools
import random
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .pipeline import (
    batched,
    decode,
    default_collation_fn,
    detshuffle,
    extract_keys,
    getfirst,
    map,
    map_dict,
    map_tuple,
    pipelinefilter,
    rename,
    rename_keys,
    reraise_exception,
    rsample,
    select,
    shuffle,
    slice,
    to_tuple,
    unbatched,
    unlisted,
)
from .pipeline.stages.extras import (
    Cached,
    LMDBCached,
    PipelineStage,
    decode_bin,
    decode_pickle,
    decode_text,
    default_decoders,
    find_decoder,
    identity,
    log_keys,
    xdecode,
)

try:
    from torch import Tensor as TorchTensor
except ImportError:  # pragma: no cover - torch is optional

    class TorchTensor:  # type: ignore[no-redef]
        """Stands for ``torch.Tensor`` when torch is not installed."""


__all__ = [
    "Cached", "FilterFunction", "LMDBCached", "PipelineStage", "RestCurried", "TorchTensor", "associate", "batched",
    "combine_values", "compose", "compose2", "decode", "decode_bin", "decode_pickle", "decode_text",
    "default_collation_fn", "default_decoders", "detshuffle", "dict2tuple", "extract_keys", "find_decoder",
    "getfirst", "identity", "info", "log_keys", "map", "map_dict", "map_tuple", "parse_field_spec", "pick",
    "pipeline", "pipelinefilter", "rename", "rename_keys", "reraise_exception", "rsample", "select", "shuffle",
    "slice", "to_tuple", "transform_with", "tuple2dict", "unbatched", "unlisted", "xdecode",
]


class FilterFunction:
    """``f`` with its arguments bound after the data: ``FilterFunction(f, *args, **kw)(data)`` is
    ``f(data, *args, **kw)`` (picklable when ``f`` is)."""

    def __init__(self, f: Callable[..., Any], *args: Any, **kw: Any):
        self.f, self.args, self.kw = f, args, kw

    def __call__(self, data: Any) -> Any:
        return self.f(data, *self.args, **self.kw)

    def __repr__(self) -> str:
        return f"<{getattr(self.f, '__name__', self.f)} {self.args} {self.kw}>"


class RestCurried:
    """``RestCurried(f)(*args, **kw)`` is ``FilterFunction(f, *args, **kw)`` (webdataset's currying helper)."""

    def __init__(self, f: Callable[..., Any]):
        self.f = f
        functools.update_wrapper(self, f)

    def __call__(self, *args: Any, **kw: Any) -> FilterFunction:
        return FilterFunction(self.f, *args, **kw)


def compose2(f: Callable[[Any], Any], g: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``x -> g(f(x))``."""
    return lambda x: g(f(x))


def compose(*args: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The functions applied left to right."""
    return functools.reduce(compose2, args)


def pipeline(source: Any, *args: Callable[[Any], Any]) -> Any:
    """``args`` applied to ``source`` in turn."""
    return compose(*args)(source) if args else source


def parse_field_spec(fields: str | Sequence[str]) -> list[list[str]]:
    """``"jpg;png cls"`` -> ``[["jpg", "png"], ["cls"]]``."""
    return [field.split(";") for field in (fields.split() if isinstance(fields, str) else fields)]


def transform_with(sample: Sequence[Any], transformers: Sequence[Callable[[Any], Any] | None] | None) -> Any:
    """A tuple sample with ``transformers[i]`` applied to element ``i`` (None leaves it); a list comes back."""
    if not transformers:
        return sample
    if len(transformers) > len(sample):
        raise ValueError(f"{len(transformers)} transformers for a sample of {len(sample)} elements")
    return [f(x) if f is not None else x for f, x in zip(transformers, sample, strict=False)] + list(sample[len(transformers):])


def pick(buf: list[Any], rng: random.Random) -> Any:
    """Remove and return a random element of ``buf`` (in O(1): the last element takes its place)."""
    k = rng.randint(0, len(buf) - 1)
    sample, buf[k] = buf[k], buf[-1]
    buf.pop()
    return sample


def _info(data: Iterable[Any], fmt: str | None = None, n: int = 3, every: int = -1, width: int = 50,
          stream: Any = None, name: str = "") -> Iterator[Any]:
    """Print the first ``n`` samples (and every ``every``-th) to ``stream`` (stderr), passing them through."""
    stream = sys.stderr if stream is None else stream
    for i, sample in enumerate(data):
        if i < n or (every > 0 and (i + 1) % every == 0):
            if fmt is None:
                stream.write(f"--- {name}\n")
                for k, v in sample.items():
                    stream.write(f"{k} {repr(v)[:width]}\n")
            else:
                stream.write(fmt.format(**sample) + "\n")
        yield sample


info = pipelinefilter(_info)


def _associate(data: Iterable[dict[str, Any]], associator: Any, **kw: Any) -> Iterator[dict[str, Any]]:
    """Add fields to each sample: ``associator(key)`` (a callable) or ``associator.get(key, {})`` (a dict)."""
    for sample in data:
        extra = associator(sample["__key__"]) if callable(associator) else associator.get(sample["__key__"], {})
        yield {**sample, **extra}


associate = pipelinefilter(_associate)


def combine_values(b: Sequence[Any], combine_tensors: bool = True, combine_scalars: bool = True) -> Any:
    """One field of a batch collated: numbers and arrays into one array, tensors stacked, the rest a list."""
    first = b[0]
    if isinstance(first, (int, float)):
        return np.array(list(b)) if combine_scalars else b
    if isinstance(first, (np.ndarray, TorchTensor)):
        if not combine_tensors:
            return b
        shapes = {tuple(x.shape) for x in b}
        if len(shapes) != 1:
            raise ValueError(f"all shapes must be equal in collation, got {shapes}")
        if isinstance(first, np.ndarray):
            return np.array(list(b))
        import torch  # noqa: PLC0415 - optional dependency (extra torch)

        return torch.stack(list(b))
    return list(b)


def tuple2dict(l: Any) -> dict[Any, Any]:  # noqa: E741 - webdataset's parameter name
    """A tuple as ``{0: ..., 1: ...}`` (a dict stays as it is)."""
    return l if isinstance(l, dict) else dict(enumerate(l))


def dict2tuple(d: dict[int, Any]) -> tuple[Any, ...]:
    """The inverse of :func:`tuple2dict`."""
    return tuple(d[i] for i in range(1 + max(d.keys())))
