"""The optional C extension (``shardstream.tar._scan``) behind public names: use these, not the private module.

The extension is built at install time when a compiler is there; without it (or with
``SHARDSTREAM_NO_EXTENSIONS=1``) every caller takes the pure-Python path, with the same results. Each function
here answers from the switch in force *now* (:data:`shardstream.tar.reader.USE_ACCELERATOR` and whether the
extension is loaded), so turning the accelerator off applies everywhere at once.

- :func:`accelerated`: whether the C header walk is used by default.
- :func:`member_scan`: the C header walk for an ``accelerate=`` argument, or None.
- :func:`sample_grouper`: the C walk that also groups members into samples (``scan_samples``), or None.
- :func:`column_grouper`: the same walk and grouping, the samples appended straight to columns (``scan_columns``),
  or None.
- :data:`CONVERSIONS`: the codecs whose values the C column makers convert themselves, and their modes;
  :data:`MAX_WANTED`: the most fields they convert at once.
- :func:`column_slicer`: the C maker of one column from offsets and sizes in a buffer (``slice_column``), or None.
- :func:`int_packer`: the C packer of a list of ints into an int64 array (``fill_int64``), or None.
- :func:`stored_keys`: the keys the C grouping stored as bytes while a shard's keys increased.
- :func:`position_permuter`: :class:`~shardstream.order.Permutation` in C (``permute_positions``), or None.
- :func:`sample_gatherer`: the C maker of a batch of sample dicts read at indexed offsets (``gather_samples``), or
  None.
- :data:`Chunks`: the base class that serves the items of lists one by one (the C ``Chunks`` type when the
  extension is there and on at import; else :class:`PyChunks`, which does the same in Python).
- :data:`Tally` and :data:`Relay`: the base classes of the pipeline's splitter and of its iterator, which pass
  items on without an interpreter frame per item (C types, or :class:`PyTally` and :class:`PyRelay`).

>>> accelerated() == (member_scan(None) is not None)
True
>>> sample_grouper(False) is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import reader
from .reader import accelerated, member_scan

__all__ = ["CONVERSIONS", "MAX_WANTED", "Chunks", "PyChunks", "PyRelay", "PyTally", "Relay", "Tally", "accelerated", "column_grouper",
           "column_slicer", "int_packer", "member_scan", "position_permuter", "sample_gatherer", "sample_grouper",
           "stored_keys"]

#: codec-table codec name -> the conversion mode of ``slice_column`` and ``scan_columns`` that gives its value for
#: simple data (and declines the rest, which the codec then decodes): ``""`` bytes kept, ``"text"`` strict UTF-8 str,
#: ``"int"`` int of an ASCII decimal (tests check each mode equal to its codec)
CONVERSIONS = {"": 0, "text": 1, "int": 3}
#: the most fields the C column maker converts at once (0 without the extension: no columns from C)
MAX_WANTED: int = getattr(reader._scan, "MAX_WANTED", 0)


def sample_grouper(accelerate: bool | None = None) -> Callable[..., Any] | None:
    """The C ``scan_samples`` (header walk and grouping into sample dicts) when the C path is
    on for ``accelerate`` (None: :func:`accelerated`) and the extension has it; else None.

    Raises :class:`~shardstream.errors.ConfigError` when ``accelerate`` is True and the extension is not built.

    >>> sample_grouper(False) is None
    True
    """
    if member_scan(accelerate) is None:
        return None
    return getattr(reader._scan, "scan_samples", None)


def column_grouper(accelerate: bool | None = None) -> Callable[..., Any] | None:
    """The C ``scan_columns`` (the walk and grouping of :func:`sample_grouper`, complete samples appended straight to
    column lists) when the C path is on for ``accelerate`` and the extension has it; else None (callers then group
    sample dicts in Python, which give the same values).

    >>> column_grouper(False) is None
    True
    """
    if member_scan(accelerate) is None:
        return None
    return getattr(reader._scan, "scan_columns", None)


def column_slicer() -> Callable[..., Any] | None:
    """The C ``slice_column(buffer, offsets, sizes, start, stop, mode)`` when the accelerator is on; else None.

    >>> column_slicer() is None or callable(column_slicer())
    True
    """
    return getattr(reader._scan, "slice_column", None) if accelerated() else None


def int_packer() -> Callable[..., Any] | None:
    """The C ``fill_int64(column, out) -> bool`` (the ints of a list written into an int64 buffer, False at the
    first item that is not an exact int in range) when the accelerator is on; else None.

    >>> import numpy as np
    >>> out = np.empty(2, np.int64)
    >>> pack = int_packer()
    >>> pack is None or (pack([3, -4], out) and out.tolist() == [3, -4] and not pack([3, True], out))
    True
    """
    return getattr(reader._scan, "fill_int64", None) if accelerated() else None


def sample_gatherer() -> Callable[..., Any] | None:
    """The C ``gather_samples(tables, numbers, rows)`` (a batch of sample dicts read from indexed shards) when the
    accelerator is on and the extension has it; else None.

    >>> sample_gatherer() is None or callable(sample_gatherer())
    True
    """
    return getattr(reader._scan, "gather_samples", None) if accelerated() else None


def stored_keys(keys: bytearray) -> list[str]:
    """The keys that :func:`sample_grouper` and :func:`column_grouper` stored in ``keys`` (a bytearray: each key's
    bytes, then its length) while the shard's keys increased, as ``str``, in order: what Python's grouping adds to
    the keys seen when it goes on from where C stopped.

    >>> stored_keys(bytearray())
    []
    """
    return reader._scan.stored_keys(keys) if keys else []


def position_permuter() -> Callable[..., Any] | None:
    """The C ``permute_positions(n, rounds, positions, out)`` (:class:`~shardstream.order.Permutation`'s bijection)
    when the accelerator is on and the extension has it; else None.

    >>> position_permuter() is None or callable(position_permuter())
    True
    """
    return getattr(reader._scan, "permute_positions", None) if accelerated() else None


class PyChunks:
    """Serves the items of lists one by one: ``next()`` gives ``_chunk[_i]`` and advances ``_i`` and ``_count``; at
    the end of the list it calls ``self._fill()``, which sets the next list (and ``_i = 0``) and returns True, or
    returns False at the end (StopIteration). A subclass defines ``_fill``.

    The pure-Python twin of the C ``Chunks`` (``_scan_types.c``), which serves an item without an interpreter frame: a
    reader cursor built on :data:`Chunks` costs one C call per sample.

    >>> class Two(Chunks):
    ...     def __init__(self):
    ...         self.lists = [[1, 2], [3]]
    ...     def _fill(self):
    ...         if not self.lists:
    ...             return False
    ...         self._chunk, self._i = self.lists.pop(0), 0
    ...         return True
    >>> it = Two()
    >>> list(it), it._count
    ([1, 2, 3], 3)
    """

    _chunk: list[Any]
    _i: int
    _count: int

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        self._chunk, self._i, self._count = [], 0, 0
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        while True:
            i = self._i
            if i < len(self._chunk):
                self._i = i + 1
                self._count += 1
                return self._chunk[i]
            if not self._fill():
                raise StopIteration

    def _fill(self) -> bool:  # pragma: no cover - defined by subclasses
        raise NotImplementedError


class PyTally:
    """Keeps every ``count``-th item of ``upstream`` from ``index`` (``count == 1``: all), counting the items read
    (``total``) and kept (``mine``); when ``upstream`` ends it calls ``self._ended()``, which may raise, and ends. A
    subclass defines ``_ended``. The pure-Python twin of the C ``Tally`` (the splitter cursor's base).

    >>> class Odd(Tally):
    ...     def _ended(self):
    ...         pass
    >>> t = Odd(); t.upstream, t.index, t.count = iter("abcde"), 1, 2
    >>> list(t), t.total, t.mine
    (['b', 'd'], 5, 2)
    """

    upstream: Any
    index: int
    count: int
    total: int
    mine: int

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        self.upstream, self.index, self.count, self.total, self.mine = None, 0, 1, 0, 0
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        upstream, count, index = self.upstream, self.count, self.index
        while True:
            try:
                item = next(upstream)
            except StopIteration:
                self._ended()
                raise StopIteration from None
            self.total += 1
            if count <= 1 or (self.total - 1) % count == index:
                self.mine += 1
                return item

    def _ended(self) -> None:  # pragma: no cover - defined by subclasses
        raise NotImplementedError


class PyRelay:
    """Serves the items of ``self._chain`` once ``_started`` is true and the chain is set; at its end sets
    ``_done`` and drops the chain. Otherwise (the first item, no chain, after the end) ``next()`` is
    ``self._step()``, which a subclass defines. The pure-Python twin of the C ``Relay`` (the pipeline iterator's
    base).

    >>> class Once(Relay):
    ...     def _step(self):
    ...         if self._done:
    ...             raise StopIteration
    ...         self._started, self._chain = True, iter([1, 2])
    ...         return 0
    >>> it = Once(); list(it), it._done, it._chain
    ([0, 1, 2], True, None)
    """

    _chain: Any
    _started: bool
    _done: bool

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        self._chain, self._started, self._done = None, False, False
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        chain = self._chain
        if not self._started or chain is None:
            return self._step()
        try:
            return next(chain)
        except StopIteration:
            self._done = True
            if self._chain is chain:
                self._chain = None
            raise

    def _step(self) -> Any:  # pragma: no cover - defined by subclasses
        raise NotImplementedError


if TYPE_CHECKING:
    Chunks = PyChunks
    Tally = PyTally
    Relay = PyRelay
else:  # base classes that pass items on without a frame per item: C when built and on, else their Python twins
    _on = accelerated()
    Chunks = getattr(reader._scan, "Chunks", PyChunks) if _on else PyChunks
    Tally = getattr(reader._scan, "Tally", PyTally) if _on else PyTally
    Relay = getattr(reader._scan, "Relay", PyRelay) if _on else PyRelay
