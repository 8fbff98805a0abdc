"""Older webdataset spellings that existing code still uses.

``Processor`` covers both historic forms: ``Processor(stage_factory, *args)(source)`` (as in the README's
``wds.Processor(wds.map, f)(dataset)``) and ``Processor(source, f, *args)`` (webdataset 0.1).

>>> import shardstream as wds
>>> list(Processor(wds.map, lambda x: x + 1)([1, 2]))
[2, 3]
>>> def evens(source, n):
...     return (x for x in source if x % n == 0)
>>> list(Processor(range(7), evens, 3))
[0, 3, 6]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["Processor"]


def _is_factory(f: Any) -> bool:
    return hasattr(f, "spec") and callable(f)


class _Processed:
    """An iterable: ``f`` applied to a fresh iterator over ``source`` on every ``iter()``."""

    def __init__(self, source: Iterable[Any], f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.source, self.f, self.args, self.kwargs = source, f, args, kwargs

    def __iter__(self) -> Iterator[Any]:
        if _is_factory(self.f):
            return iter(self.f(*self.args, **self.kwargs)(iter(self.source)))
        return iter(self.f(iter(self.source), *self.args, **self.kwargs))


def Processor(first: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - webdataset's name
    """``Processor(stage_factory_or_fn, *args)`` -> a stage; ``Processor(source, f, *args)`` -> an iterable."""
    if isinstance(first, Iterable) and args and callable(args[0]):
        return _Processed(first, args[0], args[1:], kwargs)
    if _is_factory(first):
        return first(*args, **kwargs)

    def apply(source: Iterable[Any]) -> Any:
        return first(source, *args, **kwargs)

    return apply
