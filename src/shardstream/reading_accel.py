"""The reading layer's way to the C accelerator (:mod:`shardstream._native`): the header walk that also groups members
into samples, as sample dicts or straight into columns, used by :mod:`shardstream.reading` and the fused stage
(:mod:`shardstream.pipeline.stages.fused`).

The C grouping implements the default key rule of :mod:`shardstream.samples` (its twin: :func:`~shardstream.samples.
group_samples` over :func:`~shardstream.tar.iter_tar`) for the clean steps only, and hands the rest of a shard to
Python. Each function answers from the switch in force now (:func:`~shardstream.tar.reader.accelerated`, or an
``accelerate=`` argument).

- :func:`sample_grouper`: the walk and grouping into sample dicts (``scan_samples``), or None;
- :func:`column_grouper`: the same walk and grouping, the samples appended straight to columns (``scan_columns``), or
  None;
- :func:`stored_keys`: the keys the C grouping stored as bytes while a shard's keys increased;
- :data:`CONVERSIONS`: the codecs whose values the C column makers convert themselves, and their modes;
  :data:`MAX_WANTED`: the most fields they convert at once.

>>> sample_grouper(False) is None and column_grouper(False) is None
True
>>> stored_keys(bytearray())
[]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _native
from .tar.reader import member_scan

__all__ = ["CONVERSIONS", "MAX_WANTED", "column_grouper", "sample_grouper", "stored_keys"]

#: codec-table codec name -> the conversion mode of ``slice_column`` and ``scan_columns`` that gives its value for
#: simple data (and declines the rest, which the codec then decodes): ``""`` bytes kept, ``"text"`` strict UTF-8 str,
#: ``"int"`` int of an ASCII decimal (tests check each mode equal to its codec)
CONVERSIONS = {"": 0, "text": 1, "int": 3}
#: the most fields the C column maker converts at once (0 without the extension: no columns from C)
MAX_WANTED: int = getattr(_native.extension, "MAX_WANTED", 0)


def sample_grouper(accelerate: bool | None = None) -> Callable[..., Any] | None:
    """The C ``scan_samples`` (header walk and grouping into sample dicts) when the C path is on for ``accelerate``
    (None: :func:`~shardstream.tar.accelerated`) and the extension has it; else None.

    Raises :class:`~shardstream.errors.ConfigError` when ``accelerate`` is True and the extension is not built.

    >>> sample_grouper(False) is None
    True
    """
    if member_scan(accelerate) is None:
        return None
    return getattr(_native.extension, "scan_samples", None)


def column_grouper(accelerate: bool | None = None) -> Callable[..., Any] | None:
    """The C ``scan_columns`` (the walk and grouping of :func:`sample_grouper`, complete samples appended straight to
    column lists) when the C path is on for ``accelerate`` and the extension has it; else None (callers then group
    sample dicts in Python, which give the same values).

    >>> column_grouper(False) is None
    True
    """
    if member_scan(accelerate) is None:
        return None
    return getattr(_native.extension, "scan_columns", None)


def stored_keys(keys: bytearray) -> list[str]:
    """The keys that :func:`sample_grouper` and :func:`column_grouper` stored in ``keys`` (a bytearray: each key's
    bytes, then its length) while the shard's keys increased, as ``str``, in order: what Python's grouping adds to
    the keys seen when it goes on from where C stopped.

    >>> stored_keys(bytearray())
    []
    """
    if not keys:
        return []
    return _native.extension.stored_keys(keys)  # type: ignore[union-attr]
