"""Test helpers for code built on shardstream: small shards to read (:func:`write_shards`), short reads
(:class:`ShortReads`) and a checkpoint conformance check for anything resumable.

:func:`assert_checkpoint_conformance` runs a fresh object (a pipeline, a dataset, a loader) without
interruption, saving ``state_dict()`` before many items; then, for each saved state, it makes another fresh
object, restores the state (after a pickle round trip, as a checkpoint would), and checks that what follows is
exactly the rest of the uninterrupted run: no item repeated, none missing, same order. It also checks the epochs
after the restored one, and that restoring the state saved at the end of an epoch starts the next epoch.
(Grain's ``assert_equal_output_after_checkpoint`` and torchdata's node tests do the same.)

The object must report its current iteration's position with ``state_dict()`` and make its next ``iter()``
continue from ``load_state_dict(state)``, and each ``iter()`` of it must be the next epoch.

>>> from shardstream.pipeline import DataPipeline, shuffle, batched
>>> make = lambda: DataPipeline(range(30), shuffle(8), batched(4, collation_fn=None))
>>> items = assert_checkpoint_conformance(make)
>>> len(items), sorted(x for batch in items for x in batch) == list(range(30))
(8, True)
"""

from __future__ import annotations

import io
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .indexed import index_shard
from .writer import TarWriter

__all__ = ["ShortReads", "assert_checkpoint_conformance", "assert_same", "write_shards"]

#: the fields :func:`write_shards` writes by default: a text naming the sample and a class label
DEFAULT_FIELDS: Mapping[str, Any] = {
    "txt": lambda shard, index, number: f"text {shard} {index}",
    "cls": lambda shard, index, number: number % 10,
}


def assert_same(a: Any, b: Any, where: str = "item") -> None:
    """Deep equality of items as pipelines produce them (dicts, lists, tuples, numpy arrays, torch tensors,
    bytes, scalars); raises ``AssertionError`` saying where they differ.

    >>> assert_same({"x": np.arange(3), "k": ["a"]}, {"x": np.arange(3), "k": ["a"]})
    >>> assert_same([1, (2, 3)], [1, (2, 4)])
    Traceback (most recent call last):
    ...
    AssertionError: item[1][1] differs: 3 != 4
    """
    torch = sys.modules.get("torch")
    if torch is not None and (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and torch.equal(a, b)):
            raise AssertionError(f"{where} differs: {a!r} != {b!r}")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (np.shape(a) == np.shape(b) and np.array_equal(np.asarray(a), np.asarray(b))):
            raise AssertionError(f"{where} differs: {a!r} != {b!r}")
    elif isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            raise AssertionError(f"{where} has keys {list(a)} != {list(b)}")
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b):
        if len(a) != len(b):
            raise AssertionError(f"{where} has length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif type(a) is not type(b) or a != b:
        raise AssertionError(f"{where} differs: {a!r} != {b!r}")


def _epoch(obj: Any, limit: int | None) -> list[Any]:
    items = []
    for item in obj:
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    return items


def assert_checkpoint_conformance(make: Callable[[], Any], *, points: Iterable[int] | None = None,
                                  epochs: int = 2, max_items: int | None = None,
                                  same: Callable[[Any, Any, str], None] = assert_same) -> list[Any]:
    """Check that ``make()``'s objects resume exactly from states saved at ``points`` (see the module docstring).

    :param make: returns a fresh, un-iterated object with ``state_dict``, ``load_state_dict`` and ``__iter__``
    :param points: the item indices (of the first epoch) before which a state is saved (default: all of them,
        and the end of the epoch)
    :param epochs: how many epochs are compared (the restored one and the ones after it)
    :param max_items: stop each epoch after this many items (for endless streams)
    :param same: the equality check ``same(expected, actual, where)``
    :returns: the items of the first uninterrupted epoch
    """
    reference = make()
    iterator = iter(reference)
    first: list[Any] = []
    states: dict[int, Any] = {}
    wanted = None if points is None else set(points)
    ended = False
    while max_items is None or len(first) < max_items:
        if wanted is None or len(first) in wanted:
            states[len(first)] = pickle.loads(pickle.dumps(reference.state_dict()))
        try:
            first.append(next(iterator))
        except StopIteration:
            ended = True
            break
    if ended and (wanted is None or len(first) in wanted):
        states[len(first)] = pickle.loads(pickle.dumps(reference.state_dict()))
    del iterator
    later = [_epoch(reference, max_items) for _ in range(epochs - 1)] if ended else []
    if not first:
        raise AssertionError("the object produced nothing: nothing to check")
    missing = sorted(set(wanted or ()) - set(states))
    if missing:
        raise AssertionError(f"no state saved at points {missing}: the first epoch has {len(first)} items")
    for point, state in sorted(states.items()):
        restored = make()
        restored.load_state_dict(state)
        if point < len(first):
            rest = _epoch(restored, None if max_items is None else max_items - point)
            _compare(first[point:], rest, same, f"after restoring the state saved before item {point}")
            following = later
        else:  # the end of the epoch: the next one starts
            _compare(later[0] if later else [], _epoch(restored, max_items) if later else [], same,
                     "after restoring the state saved at the end of the epoch")
            following = later[1:]
        for e, items in enumerate(following, start=1):
            _compare(items, _epoch(restored, max_items), same, f"epoch +{e} after restoring at item {point}")
    return first


def _compare(expected: list[Any], actual: list[Any], same: Callable[[Any, Any, str], None], when: str) -> None:
    for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
        try:
            same(a, b, f"item {i}")
        except AssertionError as e:
            raise AssertionError(f"{when}: {e}") from None
    if len(expected) != len(actual):
        raise AssertionError(f"{when}: {len(actual)} items follow, the uninterrupted run has {len(expected)}")


class ShortReads(io.RawIOBase):
    """A non-seekable stream that returns at most ``step`` bytes per read, like a pipe or a socket: for testing
    that a reader of shards copes with short reads.

    >>> stream = ShortReads(b"abcdefgh", step=3)
    >>> stream.read(8), stream.read(8), stream.read(8), stream.read(8)
    (b'abc', b'def', b'gh', b'')
    """

    def __init__(self, data: bytes, step: int = 7):
        self._data, self._pos, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self._data[self._pos : self._pos + min(self._step, len(buffer))]
        buffer[: len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)


def write_shards(
    folder: str | os.PathLike[str],
    sizes: Sequence[int],
    fields: Mapping[str, Any] | Callable[[int, int, int], Mapping[str, Any]] | None = None,
    *,
    name: str = "shard-{shard:06d}.tar",
    key: str = "s{shard}-{index:03d}",
    encoder: bool = True,
    index: bool = False,
) -> list[str]:
    """Write small shards for a test into ``folder`` (created if needed): shard ``n`` holds ``sizes[n]`` samples.

    ``fields`` maps each extension to its value, or to a function ``(shard, index, number) -> value`` of the
    shard's number, the sample's index in its shard and its number across all shards (default: ``txt``
    ``"text {shard} {index}"`` and ``cls`` ``number % 10``); or it is one such function that returns the whole
    sample (a ``__key__`` in it wins over ``key``). Values are encoded by the codec table as
    :class:`~shardstream.writer.TarWriter` does (``str`` as UTF-8, ``int`` as its digits, arrays as ``.npy``...);
    ``encoder=False`` writes ``bytes`` and ``str`` as they are and refuses anything else. ``name`` and ``key`` are
    format strings of ``shard``, and of ``shard``, ``index`` and ``number``; a name ending in ``.gz``, ``.bz2``,
    ``.xz`` or ``.zst`` writes a compressed shard. ``index=True`` also saves each shard's sidecar index
    (:func:`~shardstream.indexed.index_shard`), for random access. Returns the shard paths, in order.

    >>> paths = write_shards("tiny", [2, 1])
    >>> paths
    ['tiny/shard-000000.tar', 'tiny/shard-000001.tar']
    >>> from shardstream.pipeline import tarfile_samples
    >>> [(s["__key__"], s["txt"], s["cls"]) for s in tarfile_samples(paths)]
    [('s0-000', b'text 0 0', b'0'), ('s0-001', b'text 0 1', b'1'), ('s1-000', b'text 1 0', b'2')]
    >>> from shardstream.indexed import IndexedDataset
    >>> paths = write_shards("rows", [3, 2], lambda shard, index, number: {"json": {"n": number}}, index=True)
    >>> IndexedDataset(paths, decode=True)[3]["json"]
    {'n': 3}
    """
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    fields = DEFAULT_FIELDS if fields is None else fields
    paths, number = [], 0
    for shard, size in enumerate(sizes):
        path = os.path.join(folder, name.format(shard=shard))
        with TarWriter(path, encoder=encoder) as sink:
            for position in range(size):
                sample = {"__key__": key.format(shard=shard, index=position, number=number)}
                if callable(fields):
                    sample.update(fields(shard, position, number))
                else:
                    for ext, value in fields.items():
                        sample[ext] = value(shard, position, number) if callable(value) else value
                sink.write(sample)
                number += 1
        if index:
            index_shard(path)
        paths.append(path)
    return paths
