"""The base classes of the pipeline's iterators, C types when the accelerator is there: the pipeline layer's way to
the C extension (:mod:`shardstream._native`), with the int packer of batching.

- :data:`Chunks`: serves the items of lists one by one (the base of the reader cursor,
  :class:`~shardstream.pipeline.stages.reading.ReaderCursor`); its twin :class:`PyChunks`.
- :data:`Tally`: keeps every ``count``-th item of an iterator (the base of the splitter's cursor,
  :mod:`~shardstream.pipeline.stages.split`); its twin :class:`PyTally`.
- :data:`Relay`: serves a chain of iterators, a step in Python between them (the base of
  :class:`~shardstream.pipeline.iteration.PipelineIterator`); its twin :class:`PyRelay`.
- :func:`int_packer`: the ints of a list written into an int64 array (``fill_int64``), for batching.

Each is the C type when the extension is built and the accelerator is on at import
(:func:`~shardstream.tar.accelerated`), else its pure-Python twin, which behaves the same (tests run both). The C
types pass items on without an interpreter frame per item.

**The contract.** Each base calls one method of its subclass, its *hook*, named in :data:`HOOKS` (``_fill``,
``_ended``, ``_step``; the C types call them by the names of their own table, ``_scan.HOOKS``, which a test checks
equal to this one). The twins declare each hook as a documented method that raises :class:`NotImplementedError`: a
subclass overrides it (a type checker sees the signature there), and sets or reads the attributes the twin
declares (``_chunk``, ``_i``, ``_count``; ``upstream``, ``index``, ``count``, ``total``, ``mine``; ``_chain``,
``_started``, ``_done``), which live in the C object.

>>> sorted(HOOKS.items())
[('Chunks', '_fill'), ('Relay', '_step'), ('Tally', '_ended')]
>>> all(callable(getattr(twin, HOOKS[name])) for name, twin in TWINS.items())
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .. import _native
from ..tar.reader import accelerated

__all__ = ["HOOKS", "TWINS", "Chunks", "PyChunks", "PyRelay", "PyTally", "Relay", "Tally", "int_packer"]

#: base type -> the name of the method it calls on its subclasses (its hook); see the module docstring
HOOKS: Final = {"Chunks": "_fill", "Tally": "_ended", "Relay": "_step"}


def int_packer() -> Callable[..., bool] | None:
    """The C ``fill_int64(column, out) -> bool`` (the ints of a list written into an int64 buffer, False at the
    first item that is not an exact int in range) when the accelerator is on; else None. Its twin is
    ``np.array(column)`` (the array numpy would make of the same list).

    >>> import numpy as np
    >>> out = np.empty(2, np.int64)
    >>> pack = int_packer()
    >>> pack is None or (pack([3, -4], out) and out.tolist() == [3, -4] and not pack([3, True], out))
    True
    """
    return getattr(_native.extension, "fill_int64", None) if accelerated() else None


class PyChunks:
    """Serves the items of lists one by one: ``next()`` gives ``_chunk[_i]`` and advances ``_i`` and ``_count``; at
    the end of the list it calls ``self._fill()``, which sets the next list (and ``_i = 0``) and returns True, or
    returns False at the end (StopIteration). A subclass defines ``_fill``.

    The pure-Python twin of the C ``Chunks`` (``_native/_scan_types.c``), which serves an item without an interpreter frame: a
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
        """The hook (``HOOKS["Chunks"]``): set the next list in ``_chunk`` and ``_i = 0`` and return True, or return
        False at the end. May raise: the error passes through ``next()``, and the next call goes on."""
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
        """The hook (``HOOKS["Tally"]``): ``upstream`` has ended; raise to end with an error (the splitter's
        checks), or return to end the iteration."""
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
        """The hook (``HOOKS["Relay"]``): the next item when no chain is being served (the first item, no chain,
        after the end); it may set ``_started`` and ``_chain`` so that the items after it come from the chain."""
        raise NotImplementedError


#: base type -> its pure-Python twin
TWINS: Final = {"Chunks": PyChunks, "Tally": PyTally, "Relay": PyRelay}

if TYPE_CHECKING:
    Chunks = PyChunks
    Tally = PyTally
    Relay = PyRelay
else:  # base classes that pass items on without a frame per item: C when built and on, else their Python twins
    _c = _native.extension if accelerated() else None
    Chunks, Tally, Relay = (getattr(_c, name, TWINS[name]) for name in ("Chunks", "Tally", "Relay"))
