"""webdataset's ``utils`` module: small helpers webdataset code imports (``from webdataset.utils import ...``).

``enforce_security`` is webdataset's runtime switch for secure mode (no ``pipe:``, no local files, no
unpickling; see :func:`shardstream.io.trust.check_url`): it starts from ``SHARDSTREAM_SECURE`` / ``WDS_SECURE`` and
code may set it, ``shardstream.utils.enforce_security = True``.

>>> list(repeatedly([[1, 2], [3, 4]], nepochs=2))
[[1, 2], [3, 4], [1, 2], [3, 4]]
>>> make_seed(1, 2) == make_seed(1, 2), is_iterable("abc"), is_iterable([1])
(True, False, True)
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import glob
import importlib
import itertools
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np

from .config import get_settings
from .io.urls import braceexpand
from .pipeline import Placement
from .pipeline.stages.extras import PipelineStage

__all__ = [
    "ObsoleteException",
    "PipelineStage",
    "compute_sample_weights",
    "deprecated",
    "enforce_security",
    "fnmatch_with_braces",
    "glob_with_braces",
    "guess_batchsize",
    "identity",
    "is_iterable",
    "lookup_sym",
    "make_seed",
    "obsolete",
    "pytorch_worker_info",
    "pytorch_worker_seed",
    "repeatedly",
    "repeatedly0",
    "safe_eval",
]

_T = TypeVar("_T")

#: secure mode, read by :func:`shardstream.config.secure_mode` wherever a URL is opened or a field decoded
enforce_security: bool = get_settings().secure


def glob_with_braces(pattern: str) -> list[str]:
    """The files matching a glob pattern with ``{a,b}`` / ``{000..009}`` braces."""
    return [name for expanded in braceexpand(pattern) for name in glob.glob(expanded)]


def fnmatch_with_braces(filename: str, pattern: str) -> bool:
    """Whether ``filename`` matches the glob ``pattern`` after brace expansion.

    >>> fnmatch_with_braces("a.tgz", "*.{tar,tgz}")
    True
    """
    return any(fnmatch.fnmatch(filename, expanded) for expanded in braceexpand(pattern))


def make_seed(*args: Any) -> int:
    """A 31-bit seed combined from the hashes of ``args`` (stable within one process)."""
    seed = 0
    for arg in args:
        seed = (seed * 31 + hash(arg)) & 0x7FFFFFFF
    return seed


def is_iterable(obj: Any) -> bool:
    """True for iterables other than ``str`` and ``bytes``."""
    return not isinstance(obj, (str, bytes)) and isinstance(obj, Iterable)


def identity(x: _T) -> _T:
    """Return ``x``."""
    return x


def safe_eval(s: str, expr: str = "{}") -> Any:
    """A literal (number, string...) from ``expr.format(s)``; ``s`` may hold only letters, digits and ``_``.

    Unlike webdataset, never ``eval``: only Python literals are evaluated.

    >>> safe_eval("3"), safe_eval("7", "[{}, 1]")
    (3, [7, 1])
    """
    if re.sub(r"[^A-Za-z0-9_]", "", s) != s:
        raise ValueError(f"safe_eval: illegal characters in {s!r}")
    return ast.literal_eval(expr.format(s))


def lookup_sym(sym: str, modules: list[str]) -> Any:
    """The first attribute ``sym`` found in ``modules`` (relative names are inside ``shardstream``), else None.

    >>> lookup_sym("identity", [".utils"]) is identity
    True
    """
    for name in modules:
        value = getattr(importlib.import_module(name, package="shardstream"), sym, None)
        if value is not None:
            return value
    return None


def repeatedly0(loader: Iterable[_T], nepochs: int = sys.maxsize, nbatches: int = sys.maxsize) -> Iterator[_T]:
    """``nepochs`` passes over ``loader``, each cut at ``nbatches`` items."""
    for _ in range(nepochs):
        yield from itertools.islice(loader, nbatches)


def guess_batchsize(batch: tuple | list) -> int:
    """The batch size of a collated batch: the length of its first field."""
    return len(batch[0])


def repeatedly(source: Iterable[_T], nepochs: int | None = None, nbatches: int | None = None,
               nsamples: int | None = None, batchsize: Callable[..., int] = guess_batchsize) -> Iterator[_T]:
    """Iterate ``source`` again and again; stop after ``nepochs`` passes, ``nbatches`` items or ``nsamples``
    samples (counted with ``batchsize(batch)``), whichever comes first."""
    epoch = count = total = 0
    while True:
        for item in source:
            yield item
            count += 1
            if nbatches is not None and count >= nbatches:
                return
            if nsamples is not None:
                total += batchsize(item)
                if total >= nsamples:
                    return
        epoch += 1
        if nepochs is not None and epoch >= nepochs:
            return


def pytorch_worker_info(group: Any = None) -> tuple[int, int, int, int]:
    """``(rank, world_size, worker, num_workers)`` of the running code (see :class:`Placement`)."""
    here = Placement.current()
    return here.rank, here.world_size, here.worker, here.num_workers


def pytorch_worker_seed(group: Any = None) -> int:
    """webdataset's per-worker seed: ``rank * 1000 + worker``."""
    rank, _, worker, _ = pytorch_worker_info(group)
    return rank * 1000 + worker


def deprecated(arg: Any = None) -> Any:
    """Decorator (``@deprecated`` or ``@deprecated("reason")``): calls warn with a DeprecationWarning."""
    reason = None if callable(arg) else arg

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            message = f"Call to deprecated function {func.__name__}." + (f" Reason: {reason}" if reason else "")
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            return func(*args, **kwargs)

        return wrapper

    return decorate(arg) if callable(arg) else decorate


class ObsoleteException(Exception):
    """A call to an obsolete webdataset function (allow them with ``SHARDSTREAM_ALLOW_OBSOLETE=1``)."""


def obsolete(func: Callable[..., Any] | None = None, *, reason: str | None = None) -> Any:
    """Decorator: calls raise :class:`ObsoleteException` unless ``SHARDSTREAM_ALLOW_OBSOLETE`` /
    ``ALLOW_OBSOLETE`` is set (webdataset's rule)."""
    if func is None:
        return functools.partial(obsolete, reason=reason)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not get_settings().allow_obsolete:
            message = f"Call to obsolete function {func.__name__}. Set SHARDSTREAM_ALLOW_OBSOLETE=1 to permit."
            raise ObsoleteException(message + (f" Reason: {reason}" if reason else ""))
        return func(*args, **kwargs)

    return wrapper


def compute_sample_weights(n_w_pairs: list[tuple[float, float]]) -> np.ndarray:
    """Relative sampling probabilities from ``(count, weight)`` pairs, scaled so the largest is 1.

    >>> compute_sample_weights([(10, 1.0), (5, 1.0)]).tolist()
    [1.0, 0.5]
    """
    weighted = np.array([n for n, _ in n_w_pairs], dtype=float) * np.array([w for _, w in n_w_pairs], dtype=float)
    return weighted / np.amax(weighted)
