"""Batching stages and the default collation (numpy without torch; torch tensors stay tensors).

:func:`default_collation_fn` collates a list of samples position by position (tuples and lists) or key by
key (dicts): numbers become a numpy array, numpy arrays are stacked with numpy, torch tensors with
``torch.stack``, and anything else (strings, bytes, dicts, ``None``) becomes a list. torch is never imported
here: a tensor can only exist if torch already is.

>>> import numpy as np
>>> batch = default_collation_fn([(np.zeros(2), 1, "a"), (np.ones(2), 2, "b")])
>>> batch[0].shape, batch[1], batch[2]
((2, 2), array([1, 2]), ['a', 'b'])
>>> [(int(n), s) for n, s in unbatched()([[np.array([1, 2]), ["a", "b"]]])]
[(1, 'a'), (2, 'b')]
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._lazy import lazy_module
from ...errors import ConfigError
from ...resume.fields import refuse
from ..bases import int_packer
from ..core import stage
from ..cursors import Counted, Cursor

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")  # loads with the first batch, not with shardstream

__all__ = ["batched", "default_collation_fn", "listed", "unbatched", "unlisted"]


@functools.cache
def _int() -> np.dtype:
    """numpy's type for Python ints in the int64 range (int64, or int32 on numpy 1 on Windows)."""
    return np.array([0]).dtype


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def scalar_array(values: list[Any]) -> np.ndarray:
    """``np.array(values)`` of a column of numbers: a column of exact ints in the int64 range is packed by the C
    accelerator straight into the array numpy would make (its dtype, its values), without numpy's per-item type
    discovery; any other column (floats, bools, larger ints, no accelerator) goes to ``np.array``.

    >>> scalar_array([1, -2]).tolist(), scalar_array([1, 2.5]).tolist(), scalar_array([True, 3]).dtype == _int()
    ([1, -2], [1.0, 2.5], True)
    """
    if values.__class__ is list and values and values[0].__class__ is int and _int().itemsize == 8:
        pack = int_packer()
        if pack is not None:
            out = np.empty(len(values), _int())
            if pack(values, out):
                return out
    return np.array(values)


def _collate_column(values: list[Any], combine_tensors: bool, combine_scalars: bool, where: str) -> Any:
    first = values[0]
    if isinstance(first, (numbers.Number, np.generic)) and not isinstance(first, np.ndarray):
        return scalar_array(values) if combine_scalars else values
    if isinstance(first, np.ndarray):
        if not combine_tensors:
            return values
        try:
            return np.stack(values)
        except ValueError as e:
            shapes = sorted({tuple(getattr(v, "shape", ())) for v in values})
            raise ConfigError(
                f"cannot stack the arrays at {where} into a batch: their shapes differ ({shapes}); resize them to "
                f"one shape first, or pass collation_fn= (e.g. collation_fn=None for lists)"
            ) from e
    if _is_tensor(first):
        if not combine_tensors:
            return values
        import torch  # noqa: PLC0415 - optional: shardstream[torch]

        try:
            return torch.stack(values)
        except RuntimeError as e:
            shapes = sorted({tuple(v.shape) for v in values})
            raise ConfigError(
                f"cannot stack the tensors at {where} into a batch: their shapes differ ({shapes}); resize them "
                f"to one shape first, or pass collation_fn="
            ) from e
    return list(values)


def default_collation_fn(samples: Sequence[Any], combine_tensors: bool = True, combine_scalars: bool = True) -> Any:
    """Collate a list of samples into a batch (see the module docstring). Tuples/lists give a tuple of columns
    (as webdataset does); dicts give a dict of columns.

    >>> default_collation_fn([{"x": 1.5, "k": "a"}, {"x": 2.5, "k": "b"}])
    {'x': array([1.5, 2.5]), 'k': ['a', 'b']}
    """
    if not samples:
        raise ConfigError("cannot collate an empty batch")
    first = samples[0]
    if isinstance(first, dict):
        keys = list(first)
        for s in samples:
            if list(s) != keys and set(s) != set(keys):
                raise ConfigError(f"cannot batch samples with different fields: {sorted(keys)} and {sorted(s)}")
        return {k: _collate_column([s[k] for s in samples], combine_tensors, combine_scalars, f"field {k!r}")
                for k in keys}
    if isinstance(first, (tuple, list)):
        width = len(first)
        if any(len(s) != width for s in samples):
            raise ConfigError(f"cannot batch tuples of different lengths: {sorted({len(s) for s in samples})}")
        return tuple(_collate_column([s[i] for s in samples], combine_tensors, combine_scalars, f"position {i}")
                     for i in range(width))
    return _collate_column(list(samples), combine_tensors, combine_scalars, "the samples")


def _batched(source: Iterable[Any], batchsize: int = 20,
             collation_fn: Callable[[list[Any]], Any] | None = default_collation_fn,
             partial: bool = True) -> Iterator[Any]:
    """Group samples into batches of ``batchsize`` collated with ``collation_fn`` (None: plain lists). The
    last, smaller batch is kept when ``partial`` (default).

    >>> [b.tolist() for b in batched(2)(range(5))]
    [[0, 1], [2, 3], [4]]
    >>> list(batched(2, partial=False, collation_fn=None)(range(5)))
    [[0, 1], [2, 3]]
    """
    if batchsize < 1:
        raise ConfigError(f"batched() needs a batch size of at least 1, got {batchsize!r}")
    batch: list[Any] = []
    for sample in source:
        batch.append(sample)
        if len(batch) == batchsize:
            yield batch if collation_fn is None else collation_fn(batch)
            batch = []
    if batch and partial:
        yield batch if collation_fn is None else collation_fn(batch)


def _batches(count: int, /, *, batchsize: int, partial: bool, **others: Any) -> int:
    """The batches ``batched(batchsize, partial=partial)`` makes of ``count`` items."""
    size = int(batchsize)
    return math.ceil(count / size) if partial else count // size


batched = stage(_batched, state="pass", count=_batches)


def _rows(batch: Any) -> Iterator[Any]:
    if isinstance(batch, dict):
        n = len(next(iter(batch.values()))) if batch else 0
        for i in range(n):
            yield {k: v[i] for k, v in batch.items()}
    elif isinstance(batch, (tuple, list)):
        if not batch:
            return
        n = len(batch[0])
        for i in range(n):
            yield tuple(column[i] for column in batch)
    else:  # one array or tensor: its rows
        yield from batch


class _Unbatch(Counted):
    """The rows of each batch (``rows_of(batch)``); the position is the input's before the current batch and the
    index in it (the base of ``unbatched`` and ``unlisted``)."""

    fields = ("index",)
    rows_of: Callable[[Any], Any]

    def __init__(self, upstream: Cursor, *, name: str):
        super().__init__(upstream, name)
        self.index, self.before = 0, None
        self.rows: list[Any] | None = None

    def __next__(self) -> Any:
        while self.rows is None or self.index >= len(self.rows):
            self.before = self.upstream.mark()
            self.rows, self.index = list(self.rows_of(next(self.upstream))), 0
        self.index += 1
        return self.rows[self.index - 1]

    def mark(self) -> Any:
        return (self.upstream.mark(), 0) if self.rows is None else (self.before, self.index)

    def state_at(self, mark: Any) -> dict[str, Any]:
        return {"upstream": self.upstream.state_at(mark[0]), "index": mark[1]}

    def state_dict(self) -> dict[str, Any]:
        return self.state_at(self.mark())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)  # the input's position and the index, checked
        self.rows = None
        if self.index:
            self.before = self.upstream.mark()
            try:
                self.rows = list(self.rows_of(next(self.upstream)))
            except StopIteration:
                self.rows = []
            if self.index > len(self.rows):
                raise refuse(self.name, "index", f"is {self.index}; the batch there has "
                                                            f"{len(self.rows)} rows")


class _Unbatched(_Unbatch):
    """Split batches back into samples (the inverse of ``batched`` with the default collation).

    >>> list(unbatched()([{"x": [1, 2], "k": ["a", "b"]}]))
    [{'x': 1, 'k': 'a'}, {'x': 2, 'k': 'b'}]
    """

    rows_of = staticmethod(_rows)


unbatched = stage(_Unbatched)


def _listed(source: Iterable[Any], batchsize: int = 20, partial: bool = True) -> Iterator[list[Any]]:
    """Group samples into plain lists of ``batchsize`` (no collation).

    >>> list(listed(2)("abc"))
    [['a', 'b'], ['c']]
    """
    return _batched(source, batchsize, collation_fn=None, partial=partial)


listed = stage(_listed, state="pass")


class _Unlisted(_Unbatch):
    """Flatten lists of samples.

    >>> list(unlisted()([["a", "b"], ["c"]]))
    ['a', 'b', 'c']
    """

    rows_of = list


unlisted = stage(_Unlisted)
