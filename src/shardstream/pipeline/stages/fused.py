"""Fused plans: the README's batch idioms run as one loop instead of a chain of generators.

``.decode().to_tuple("txt", "cls").batched(256)`` and ``.to_tuple("txt", "cls").map_tuple(bytes.decode, int)
.batched(256)`` cost four generator steps and a dict per sample when chained. :func:`fuse` recognises a run of
pass-through stages of the form ``[decode()] to_tuple(...) [map_tuple(...)] batched(n)`` (default collation) and
replaces it by one loop that takes the fields each row needs, decodes them with the codec table's function (or
applies the ``map_tuple`` builtins) and collects them straight into columns.

The outputs are those of the chain, by construction: a row is made the fast way only when the sample is a plain
dict with the wanted fields (for ``decode``: exactly those, besides metadata such as ``__key__``, ``__url__`` and
``__local_path__``, which the decoder passes through without a failure and ``to_tuple`` does not take), each value
is ``bytes`` (for ``decode``), and every function succeeds and gives a value that is not None. Any other sample goes through the
stages' own generator functions, one sample at a time, with their handlers (so errors, their context and the
handler's answers are the chain's). The functions that may run twice on such a sample are pure: codec-table
decoders and the builtins ``bytes.decode``, ``int``, ``float``, ``str``. Samples are taken from the input one at a
time and batches are yielded at the same points as the chain's, so the position (and the resume state) is the
same. A run that is not recognised keeps its stages.

Fed by the tar reader (``ReaderCursor``, directly or through a splitter that keeps everything), the loop asks it for
rows as columns (``take_columns``): the C walk that groups the members converts the wanted fields itself (bytes,
``str`` by strict UTF-8, ``int`` of a plain decimal: what the codecs and the builtins give on such values) with no
dict per sample, and hands every sample that does not fit (a missing or, for ``decode``, an extra field; a value it
does not convert) over as its dict, which takes the way above. Same rows, same positions.

>>> from shardstream.pipeline import batched, decode, to_tuple
>>> stages = [decode(), to_tuple("txt", "cls"), batched(2)]
>>> makes = fuse(stages, [None, None, None]); len(makes)
1
>>> rows = [{"__key__": str(i), "__url__": "u", "txt": b"t%d" % i, "cls": b"%d" % i} for i in range(3)]
>>> [(b[0], b[1].tolist()) for b in makes[0](iter(rows))]
[(['t0', 't1'], [0, 1]), (['t2'], [2])]
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any

from ...codecs import Decoder
from ...codecs.table import lookup
from ...reading_accel import CONVERSIONS, MAX_WANTED
from ...redact import redacting_logger
from ..core import Stage
from .batching import _batched, _collate_column, default_collation_fn, scalar_array
from .per_sample import _decode, _map, _map_tuple, _to_tuple

__all__ = ["fuse"]

log = redacting_logger(__name__)

Make = Callable[[Iterable[Any]], Iterator[Any]]
_PURE = (bytes.decode, int, float, str)  # builtins that may run twice on a sample that falls back
_SKIP, _STOP = object(), object()
_NEVER_NONE = ("text", "int", "")  # codec-table decoders that never give None
_DICT, _BYTES = {dict}, {bytes}
#: map_tuple builtins -> the reader's conversion of a bytes field that equals them on simple data (``scan_columns``)
_CONVERTED = ((None, 0), (bytes.decode, 1), (int, 3))


def _runs(item: Any, fn: Callable[..., Any]) -> bool:
    """Whether ``item`` is a stage of the generator ``fn`` (the stages a plan fuses are those of its functions)."""
    return isinstance(item, Stage) and item.spec.fn is fn


class _Plan:
    """One recognised run: the stages' arguments, the fast functions per field, the fallback."""

    def __init__(self, dec: Stage | None, tup: Stage, mt: Stage | None, bat: Stage):
        self.dec, self.tup, self.mt = dec, tup, mt
        fields = _fields(tup)
        self.fields, self.wanted = fields, frozenset(fields)
        args = bat.arguments
        self.batchsize, self.partial = args["batchsize"], args["partial"]
        self.decoder = Decoder(allow_unsafe=dec.arguments["allow_unsafe"]) if dec is not None else None
        fs = tuple(mt.arguments["fs"][: len(fields)]) if mt is not None else ()
        fs = fs + (None,) * (len(fields) - len(fs))
        fns = [self._codec(f) for f in fields] if dec is not None else [None] * len(fields)
        self.plan = list(zip(fields, fns, fs, strict=True))
        self.keys: frozenset[Any] | None = None  # the latest set of keys a decoded fast row had
        self.nkeys = 0  # its size
        self.meta: Callable[[Any], Any] | None = None  # takes its metadata keys from a sample
        # the stages' handlers, watched: the fallback must know whether the last one said stop
        self.answers: list[bool] = []
        self.handlers = [self._watch(s.arguments["handler"]) if s is not None else None for s in (dec, tup, mt)]
        # the stages themselves, with the handlers watched (decode's is run with the decoder made once, above)
        self.tup_watched = tup.replace(handler=self.handlers[1])
        self.mt_watched = mt.replace(handler=self.handlers[2]) if mt is not None else None
        # whole chunks a column at a time when no function can give None (the rows' None check is then moot)
        self.columnar_ok = self.decoder is None or all(self.decoder.table_codec(f) in _NEVER_NONE for f in fields)
        self.want = self._columns_wanted(fs)

    def _columns_wanted(self, fs: tuple[Any, ...]) -> tuple[tuple[str, ...], bytes, bool] | None:
        """What to ask a reader that can group samples straight into columns (``take_columns``): the fields, the
        conversion per field that gives the row's value, and whether the sample must have no other field (for
        ``decode``, whose fast rows are those of samples with only the wanted fields besides metadata); None when
        a function is not one the reader makes."""
        if self.decoder is not None:
            if any(g is not None for g in fs):
                return None
            modes = [CONVERSIONS.get(self.decoder.table_codec(f)) for f in self.fields]  # type: ignore[arg-type]
        else:
            modes = [next((m for g2, m in _CONVERTED if g is g2), None) for g in fs]
        if None in modes or len(self.fields) > MAX_WANTED:
            return None
        return self.fields, bytes(modes), self.decoder is not None  # type: ignore[arg-type]

    def _codec(self, field: str) -> Callable[[bytes], Any] | None:
        name = self.decoder.table_codec(field)  # type: ignore[union-attr]
        if name is None:
            raise LookupError(field)
        return None if name == "" else lookup(field)[1].decode  # type: ignore[index]

    def _watch(self, handler: Callable[[BaseException], bool]) -> Callable[[BaseException], bool]:
        def watched(exn: BaseException) -> bool:
            keep = handler(exn)
            self.answers.append(bool(keep))
            return keep

        return watched

    def decodes_fast(self, keys: Any) -> bool:
        """Whether ``decode()`` of a sample with these keys decodes the wanted fields and nothing else that could
        fail: the other keys are metadata (``__key__``, ``__url__``, ``__local_path__``...), which the decoder passes
        through whatever their values."""
        if keys == self.keys:
            return True
        if not self.wanted <= keys or not all(isinstance(k, str) and k[:2] == "__" for k in keys - self.wanted):
            return False
        self.keys, self.nkeys = frozenset(keys), len(keys)
        meta = sorted(self.keys - self.wanted)
        self.meta = itemgetter(*meta) if meta else None
        return True

    def slow(self, sample: Any) -> Any:
        """One sample through the stages' own generators: its row, ``_SKIP`` or ``_STOP``."""
        self.answers.clear()
        stream: Iterable[Any] = [sample]
        if self.decoder is not None:
            stream = _map(stream, self.decoder, handler=self.handlers[0])  # type: ignore[arg-type]
        stream = self.tup_watched(stream)
        if self.mt_watched is not None:
            stream = self.mt_watched(stream)
        out = list(stream)
        if out:
            return out[0]
        return _STOP if self.answers and not self.answers[-1] else _SKIP

    def __call__(self, source: Iterable[Any]) -> Iterator[Any]:
        take, give_back = getattr(source, "take", None), getattr(source, "give_back", None)
        take_columns = getattr(source, "take_columns", None) if self.want is not None else None
        if log.isEnabledFor(logging.DEBUG):
            how = "columns from the reader's C walk where samples fit" if take_columns is not None else "samples"
            names = [s.spec.name for s in (self.dec, self.tup, self.mt) if s is not None]
            log.debug("fused plan %s: one loop over %s", [*names, "batched"], how)
        if take is None or give_back is None:  # one sample at a time
            it = iter(source)

            def take(n: int) -> list[Any]:
                sample = next(it, _SKIP)
                return [] if sample is _SKIP else [sample]

            def give_back(n: int) -> None:
                pass  # never more than one sample taken

        width, size = len(self.plan), self.batchsize
        columns: list[list[Any]] = [[] for _ in range(width)]
        appends = [c.append for c in columns]
        rows, stopped = 0, False
        while not stopped:
            made = None
            if take_columns is not None:  # rows straight from the reader where the samples fit
                made, chunk = take_columns(size - rows, self.want)
            else:
                chunk = take(size - rows)  # never more than the batch needs: its position is the chain's
            if made is not None:
                for column, values in zip(columns, made, strict=True):
                    column += values
                rows += len(made[0])
            elif not chunk:
                break
            else:
                rows, stopped = self._rows(chunk, columns, appends, rows, give_back)
            if rows == size:
                yield self.collate(columns)
                columns = [[] for _ in range(width)]
                appends = [c.append for c in columns]
                rows = 0
        if rows and self.partial:
            yield self.collate(columns)

    def _rows(self, chunk: list[Any], columns: list[list[Any]], appends: list[Any], rows: int,
              give_back: Callable[[int], None]) -> tuple[int, bool]:
        """Add the rows of a chunk of samples to the columns: ``(rows, stopped)`` after it (the samples after a
        stop, or after an error, are given back)."""
        done = self.columnar(chunk) if self.columnar_ok else None
        if done is not None:  # every sample of the chunk the fast way, a column at a time
            for column, values in zip(columns, done, strict=True):
                column += values
            return rows + len(chunk), False
        used, width = 0, len(columns)
        try:
            for sample in chunk:
                used += 1
                row = self.fast(sample)
                if row is None:
                    row = self.slow(sample)
                    if row is _SKIP:
                        continue
                    if row is _STOP:
                        give_back(len(chunk) - used)
                        return rows, True
                for i in range(width):
                    appends[i](row[i])
                rows += 1
        except BaseException:
            give_back(len(chunk) - used)
            raise
        return rows, False

    def columnar(self, chunk: list[Any]) -> list[list[Any]] | None:
        """The rows of a whole chunk as columns, or None when one of them is not a fast row (see :meth:`fast`):
        the same checks and functions, one column at a time."""
        decoding = self.decoder is not None
        try:
            if set(map(type, chunk)) != _DICT:
                return None
            if decoding:
                # every sample has the keys of the first (a validated set): as many, and each of them (the
                # metadata's here, the fields' below, where a missing one raises KeyError)
                if not self.decodes_fast(chunk[0].keys()) or set(map(len, chunk)) != {self.nkeys}:
                    return None
                if self.meta is not None:
                    collections.deque(map(self.meta, chunk), 0)
            out = []
            for field, fn, g in self.plan:
                values = list(map(itemgetter(field), chunk))
                if decoding:
                    if set(map(type, values)) != _BYTES:
                        return None
                    if fn is not None:
                        values = list(map(fn, values))
                elif None in values:
                    return None
                if g is not None:
                    values = list(map(g, values))
                out.append(values)
            return out
        except Exception:  # noqa: BLE001 - the stages make this chunk and report its error
            return None

    def fast(self, sample: Any) -> list[Any] | None:
        """The row of a sample the fast way, or None when the stages must make it."""
        decoding = self.decoder is not None
        if sample.__class__ is not dict or (decoding and not self.decodes_fast(sample.keys())):
            return None
        row = []
        try:
            for field, fn, g in self.plan:
                value = sample.get(field)
                if decoding:
                    if value.__class__ is not bytes:
                        return None
                    if fn is not None:
                        value = fn(value)
                if value is None:
                    return None
                if g is not None:
                    value = g(value)
                row.append(value)
        except Exception:  # noqa: BLE001 - the stages make this row and report its error
            return None
        return row

    @staticmethod
    def collate(columns: list[list[Any]]) -> tuple[Any, ...]:
        """``default_collation_fn`` of the rows, computed from their columns (the same function per column; for
        the decoders' and builtins' own types, its answer without its type tests: the column itself, a new list,
        for ``str`` and ``bytes``, :func:`~.batching.scalar_array` of it (``np.array``) for ``int`` and ``float``)."""
        out: list[Any] = []
        for i, column in enumerate(columns):
            kind = column[0].__class__
            if kind is str or kind is bytes:
                out.append(column)
            elif kind is int or kind is float:
                out.append(scalar_array(column))
            else:
                out.append(_collate_column(column, True, True, f"position {i}"))
        return tuple(out)


def _recognise(items: list[Any], i: int) -> tuple[_Plan, int] | None:
    j, dec, mt = i, None, None
    if _runs(items[j], _decode):
        args = items[j].arguments
        if args["specs"] or args["only"] is not None or args["partial"] or args["pre"] or args["post"]:
            return None
        dec, j = items[j], j + 1
    if j >= len(items) or not _runs(items[j], _to_tuple):
        return None
    tup, j = items[j], j + 1
    if j < len(items) and _runs(items[j], _map_tuple):
        mt, j = items[j], j + 1
        if any(f is not None and not any(f is p for p in _PURE) for f in mt.arguments["fs"]):
            return None
    if j >= len(items) or not _runs(items[j], _batched):
        return None
    bat = items[j]
    args = bat.arguments
    if args["collation_fn"] is not default_collation_fn or not isinstance(args["batchsize"], int) \
            or args["batchsize"] < 1:
        return None
    fields = _fields(tup)
    if not fields or any(not isinstance(f, str) or ";" in f or f.startswith("__") for f in fields):
        return None
    try:
        return _Plan(dec, tup, mt, bat), j + 1 - i
    except LookupError:  # a field the decoder does not leave to the codec table alone
        return None


def _fields(tup: Stage) -> tuple[Any, ...]:
    """The fields of a ``to_tuple`` stage (one string with spaces: its words)."""
    fields = tuple(tup.arguments["fields"])
    return tuple(fields[0].split()) if len(fields) == 1 and isinstance(fields[0], str) and " " in fields[0] else fields


def fuse(items: list[Any], makes: list[Make]) -> list[Make]:
    """``makes`` (one per pass-through stage ``items[i]``) with each recognised run replaced by its fused loop."""
    out, i = [], 0
    while i < len(items):
        found = _recognise(items, i)
        if found is None:
            out.append(makes[i])
            i += 1
        else:
            out.append(found[0])
            i += found[1]
    return out
