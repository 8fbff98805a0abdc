"""Reading shards into samples and column batches, the fast way: the C header walk groups members while it can.

:func:`iter_samples` is ``group_samples(iter_tar(stream, url), url, ...)`` made fast, and :class:`ColumnBatches`
reads straight into ``{field: [value, ...]}`` batches. Both drive the C grouping (``scan_samples`` into dicts,
``scan_columns`` into columns) through one loop (:func:`_scanned`) that hands the rest of a shard to the Python walk and :func:`~shardstream.samples.group_samples`
at the first thing the C code leaves to Python, so every decision and error message is the Python one.

>>> import io
>>> from shardstream.tar import TarStreamWriter
>>> out = io.BytesIO()
>>> with TarStreamWriter(out) as tw:
...     _ = tw.add("a.txt", b"x"), tw.add("b.txt", b"y")
>>> [s["__key__"] for s in iter_samples(io.BytesIO(out.getvalue()), "s.tar")]
['a', 'b']
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import IO, Any, BinaryIO

from . import reading_accel
from .errors import ConfigError
from .redact import redacting_logger
from .samples import DEFAULT_RULE, Handler, KeyRule, RuleSpec, SampleStats, _group, _reraise, _rule
from .tar import compress, reader
from .tar.buffers import source_for

__all__ = ["ColumnBatches", "ColumnRequest", "ColumnRun", "iter_samples"]

log = redacting_logger(__name__)

#: members at least this large leave the C grouping (the Python walk reads them with one copy, not two)
_C_GROUP_MAX = 1 << 20


def _is_default(rule: KeyRule) -> bool:
    """Whether ``rule`` is WebDataset's default one, which the C grouping implements."""
    return rule.rule in (None, "first-dot") and rule.lowercase


def _c_scan(accelerate: bool | None, rule: KeyRule) -> Any:
    """``(C grouping into dicts, into columns, member scan to resume with in Python)``, or None when the C grouping
    cannot run."""
    grouper, columns = reading_accel.sample_grouper(accelerate), reading_accel.column_grouper(accelerate)
    if grouper is None or columns is None or not _is_default(rule):
        log.debug("samples grouped in Python: %s", "the key rule is not the default one" if grouper is not None
                  else "the C extension is off or not built")
        return None
    return grouper, columns, reader.member_scan(accelerate)


def _lists(samples: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for sample in samples:
        yield [sample]


class ColumnRequest:
    """What a reader of chunks (``iter_samples(chunks=True, columns=request)``) wants as columns now: ``want`` is
    None (lists of sample dicts) or ``(fields, modes, exact)`` (see ``scan_columns`` in ``_native/_scan_columns.c``): the chunks
    the C grouping makes while it is set are then :class:`ColumnRun` objects where the samples fit, and lists of one
    sample dict where one does not (a missing or, with ``exact``, extra field; a value that does not convert)."""

    __slots__ = ("want",)

    def __init__(self) -> None:
        self.want: tuple[tuple[str, ...], bytes, bool] | None = None


class ColumnRun:
    """Consecutive samples as ``rows`` rows of the wanted fields: ``columns[j]`` holds field j's converted values."""

    __slots__ = ("columns", "rows")

    def __init__(self, columns: list[list[Any]], rows: int):
        self.columns, self.rows = columns, rows


#: a shard's reading goes back to sample dicts for the rest of the shard once more than this many of its samples,
#: and more than one in 8 of them, did not fit the column request (each costs one C call and a dict)
_MISFITS = 64


def with_local_path(samples: Iterable[Any], local: str | None, chunks: bool) -> Iterator[Any]:
    """``samples`` (lists of them with ``chunks``; column runs pass as they are) with ``__local_path__`` set."""
    if local is None:
        yield from samples
        return
    for item in samples:
        if item.__class__ is not ColumnRun:  # rows of fields only: no metadata
            for sample in item if chunks else (item,):
                sample["__local_path__"] = local
        yield item


def _scanned(
    tar: IO[bytes], bufsize: int, url: str, c_scan: Any, on_error: Handler, stats: SampleStats,
    batches: ColumnBatches | None = None, chunks: bool = False, request: ColumnRequest | None = None,
    local: str | None = None,
) -> Iterator[Any]:
    """The ONE driver of the C grouping over the tar stream ``tar`` (what :func:`~shardstream.tar.compress.read_tar`
    gives): samples (or, with ``batches``, full column batches; with ``chunks``, lists of samples, or
    :class:`ColumnRun` chunks while ``request`` asks for them) grouped in C while it can; then the Python walk and
    grouping from the state the C code reached, over the members :func:`~shardstream.tar.compress.iter_tar` gives
    from there (a decompression error held back for the end ends them). ``local``: each sample's
    ``__local_path__`` (set in C on the samples it groups)."""
    (scan_samples, scan_columns, scan), split = c_scan, DEFAULT_RULE.split
    src = source_for(tar, bufsize)
    seen: set[str] = set()
    keys = bytearray()  # the keys so far while they increase, as bytes (C makes no str of them): seen | stored_keys
    current: dict[str, Any] | None = None
    current_key: str | None = None
    misfits = fits = 0
    recheck = getattr(src, "recheck", None)  # a mapped window: is the file still as long? (see WindowBuffer)
    while True:
        if recheck is not None and src.pos:  # before C reads on in the window: the caller ran (it had what the last
            recheck()  # call gave) and may have cut the file
        want = request.want if request is not None and (misfits <= _MISFITS or misfits * 8 <= fits) else None
        if batches is not None:
            rows, src.pos, current, current_key, need, raw = scan_columns(
                src.buf, src.pos, url, seen, current, current_key, split, keys, batches.columns, batches.batch_size,
                None, batches._mode if batches.decoder is not None else None,
            )
            stats.samples += rows
            if raw:  # fields with values the C conversion left as bytes
                batches._raw.update(raw)
            if need == -2:  # the batch is full, or the next sample has other fields
                yield batches.flush()
                continue
        elif want is not None:
            lists: list[list[Any]] = [[] for _ in want[0]]
            rows, src.pos, current, current_key, need, odd = scan_columns(
                src.buf, src.pos, url, seen, current, current_key, split, keys, lists, 1 << 62, *want
            )
            stats.samples += rows
            fits += rows
            if rows:
                yield ColumnRun(lists, rows)
            if odd is not None:
                misfits += 1
                stats.samples += 1
                if local is not None:
                    odd["__local_path__"] = local
                yield [odd]
            if need == -2:
                continue
        else:
            done, src.pos, current, current_key, need = scan_samples(
                src.buf, src.pos, url, seen, current, current_key, split, keys, local
            )
            if done:
                stats.samples += len(done)
                if chunks:
                    yield done
                else:
                    yield from done
        try:
            more = 0 < need < _C_GROUP_MAX and src.fill(need)
        except Exception:  # the stream broke: Python's walk reads what arrived before it, and meets the error
            more = False  # where it asks for more (the source raises it again), as a walk from the start does
        if not more:
            _log_hand_over(url, src, need)
            members = compress.then_pending(reader.walk(src, url, scan, announce=True), tar)
            break  # a member or header for Python; or the stream ends where Python must report it
    samples = _group(members, url, split, on_error, stats, seen, current, current_key, _StoredKeys(keys), reader.AHEAD)
    if batches is not None:
        yield from batches._add_all(samples)
    else:
        yield from with_local_path(_lists(samples) if chunks else samples, local, chunks)


def _log_hand_over(url: str, src: Any, need: int) -> None:
    """A DEBUG record when the C grouping leaves the rest of a shard to Python before its end."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    head = bytes(src.buf[src.pos : src.pos + 512])
    if need == 0 and len(head) == 512 and not head.strip(b"\0"):
        return  # the end-of-archive blocks: the usual end of a shard read wholly in C
    why = {0: "a header the Python walk reads (an extended or unusual header)",
           -1: "a member the Python grouping must see (no extension, a repeated field, a key seen before)"}.get(need)
    if why is None:
        why = f"a member of {need} bytes" if need >= _C_GROUP_MAX else "the stream ended or broke"
    log.debug("%s: the C grouping hands the rest over to Python at byte %d: %s", url, src.base + src.pos, why)


class _StoredKeys:
    """The keys the C grouping stored as bytes (:func:`~shardstream.reading_accel.stored_keys`), made into ``str`` only
    if Python's grouping checks a new key: at the end of a shard read wholly in C, never."""

    __slots__ = ("keys",)

    def __init__(self, keys: bytearray):
        self.keys = keys

    def __bool__(self) -> bool:
        return bool(self.keys)

    def __iter__(self) -> Iterator[str]:
        return iter(reading_accel.stored_keys(self.keys))


def iter_samples(
    stream: BinaryIO,
    url: str = "<stream>",
    *,
    rule: RuleSpec = None,
    handler: Handler | None = None,
    stats: SampleStats | None = None,
    bufsize: int = 1 << 20,
    accelerate: bool | None = None,
    zero_copy: bool = False,
    chunks: bool = False,
    columns: ColumnRequest | None = None,
    local_path: str | None = None,
) -> Iterator[Any]:
    """The samples of one tar shard (plain or compressed): ``group_samples(iter_tar(stream, url), url, ...)``.

    Same samples, errors, warnings and ``stats`` as that composition, faster: with the default key rule and the
    C extension (:func:`shardstream.tar.accelerated`, or ``accelerate=True``), headers are walked and members
    grouped into sample dicts in one C pass. The C grouping makes only the clean steps (a new field, a new key);
    at a member without extension, a repeated extension or key, an extension starting with ``__``, a member of
    1 MiB or more, or any header the C walk leaves to Python, the rest of the shard goes through
    :func:`~shardstream.tar.iter_members` and :func:`group_samples` from the state reached, so every decision
    is theirs. ``accelerate=False`` or another key rule always takes the Python path.

    ``zero_copy=True``: when ``stream`` is an uncompressed tar file on a local file system (a plain regular file,
    see :func:`shardstream.tar.compress.map_tar`), the file is memory-mapped and every field is a read-only
    ``memoryview`` into the map instead of ``bytes``: no data is copied (the fast path for large fields). Same
    samples, errors and warnings otherwise; other streams are read as usual (fields are ``bytes``). A view keeps
    the map alive; ``bytes(view)`` copies. Members are grouped in Python (~1 us per member), so small fields are
    faster without it.

    ``chunks=True`` yields lists of consecutive samples instead (as many as one C pass grouped; one at a time
    where Python groups them): the same samples and errors, at the same points of the stream, for readers that
    take several samples at once. With ``chunks`` and a :class:`ColumnRequest` as ``columns``, the chunks made while
    the request asks for columns are :class:`ColumnRun` objects (the rows of the samples that fit, their fields
    converted) and lists of one sample (those that do not fit); nothing else changes.

    ``local_path``: each sample gets ``"__local_path__": local_path`` after its fields (webdataset's key for the
    local file a sample came from; set in the C pass where it groups the samples).

    >>> import io
    >>> from shardstream.tar import TarStreamWriter
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     _ = tw.add("a.txt", b"x"), tw.add("a.cls", b"1"), tw.add("b.txt", b"y")
    >>> [sorted(s.items()) for s in iter_samples(io.BytesIO(out.getvalue()), "s.tar")]
    [[('__key__', 'a'), ('__url__', 's.tar'), ('cls', b'1'), ('txt', b'x')], [('__key__', 'b'), ('__url__', 's.tar'), ('txt', b'y')]]
    """
    if bufsize < 1:
        raise ConfigError(f"bufsize must be a positive number of bytes, got {bufsize!r}")
    key_rule = _rule(rule)
    on_error = handler or _reraise
    stats = stats if stats is not None else SampleStats()
    mapped = compress.map_tar(stream) if zero_copy else None
    members: Iterator[tuple[str, bytes | memoryview, int]]
    if mapped is not None:
        members = reader.iter_members_mapped(mapped, url, accelerate=accelerate)
        grouped = _group(members, url, key_rule.split, on_error, stats)
        return with_local_path(_lists(grouped) if chunks else grouped, local_path, chunks)
    c_scan = _c_scan(accelerate, key_rule)
    if c_scan is None:
        members = compress.read_tar(stream, url, lambda tar: reader.iter_announced(tar, url, bufsize=bufsize,
                                                                                   accelerate=accelerate))
        grouped = _group(members, url, key_rule.split, on_error, stats, ahead=reader.AHEAD)
        return with_local_path(_lists(grouped) if chunks else grouped, local_path, chunks)
    return compress.read_tar(
        stream, url, lambda tar: _scanned(tar, bufsize, url, c_scan, on_error, stats, chunks=chunks,
                                         request=columns if chunks else None, local=local_path)
    )



class ColumnBatches:
    """Samples read straight into column batches ``{field: [value, ...]}`` of ``batch_size`` rows, across shards.

    The rows of one batch have the same fields: a sample with other fields than the batch's ends the batch early
    (a shorter batch) and starts the next. Fields are in the order of the batch's first sample. The samples, their
    errors and ``stats`` are those of :func:`iter_samples`; with the default key rule and the C extension no
    per-sample Python code runs (the fast path for batches of small fields; decode the columns with
    :meth:`shardstream.codecs.Decoder.decode_columns`).

    ``decoder`` (a :class:`~shardstream.codecs.Decoder`): the batches come decoded, ``decoder.decode_columns(batch)``
    (same values, same errors, raised where the batch is made); the codec table's text and integer fields are
    converted in C while the values are simple, the rest by ``decode_columns``.

    >>> import io
    >>> from shardstream.tar import TarStreamWriter
    >>> out = io.BytesIO()
    >>> with TarStreamWriter(out) as tw:
    ...     for i in range(5):
    ...         _ = tw.add(f"{i}.txt", b"t%d" % i), tw.add(f"{i}.cls", b"%d" % i)
    >>> batches = ColumnBatches(2)
    >>> [b["cls"] for b in batches.read(io.BytesIO(out.getvalue()), "s.tar")]
    [[b'0', b'1'], [b'2', b'3']]
    >>> batches.flush()
    {'__key__': ['4'], '__url__': ['s.tar'], 'txt': [b't4'], 'cls': [b'4']}
    """

    def __init__(
        self,
        batch_size: int,
        *,
        rule: RuleSpec = None,
        handler: Handler | None = None,
        stats: SampleStats | None = None,
        bufsize: int = 1 << 20,
        accelerate: bool | None = None,
        decoder: Any = None,
    ):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.batch_size = batch_size
        self.rule, self.handler, self.bufsize, self.accelerate = _rule(rule), handler, bufsize, accelerate
        self.stats = stats if stats is not None else SampleStats()
        self.columns: dict[str, list[Any]] = {}
        self.decoder = decoder
        self._modes: dict[str, int] = {}  # field -> conversion mode (CONVERSIONS) of the decoder's codec
        self._raw: set[str] = set()  # the batch's fields that hold values left as bytes (to decode in Python)

    def read(self, stream: BinaryIO, url: str = "<stream>") -> Iterator[dict[str, list[Any]]]:
        """Read one shard; yield the batches it completes (the last, partial one stays for the next shard)."""
        c_scan = _c_scan(self.accelerate, self.rule)
        if c_scan is None:
            samples = iter_samples(stream, url, rule=self.rule, handler=self.handler, stats=self.stats,
                                   bufsize=self.bufsize, accelerate=self.accelerate)
            return self._add_all(samples)
        on_error = self.handler or _reraise
        return compress.read_tar(
            stream, url, lambda tar: _scanned(tar, self.bufsize, url, c_scan, on_error, self.stats, self)
        )

    def rows(self) -> int:
        """The number of rows in the partial batch."""
        return len(next(iter(self.columns.values()), ()))

    def add(self, sample: dict[str, Any]) -> dict[str, list[Any]] | None:
        """Add one sample; return the batch it completed or ended (None if none)."""
        columns, done = self.columns, None
        if columns and columns.keys() != sample.keys():  # other fields: the batch ends before this sample
            done, columns = self._done(columns), {}
        if self.decoder is not None:
            self._raw.update(sample)  # values as read
        if not columns:
            self.columns = columns = {k: [v] for k, v in sample.items()}
        else:
            for k, v in sample.items():
                columns[k].append(v)
        if len(next(iter(columns.values()))) >= self.batch_size:
            # full; when the batch also ended before this sample (done is set), batch_size >= 2, so not here
            done, self.columns = self._done(columns), {}
        return done

    def flush(self) -> dict[str, list[Any]] | None:
        """The partial batch left (None if empty); the batcher starts empty again."""
        columns, self.columns = self.columns, {}
        return self._done(columns) if columns else None

    def _mode(self, field: str) -> int:
        """The C conversion of ``field`` that gives the decoder's value on simple data; 0: none (bytes)."""
        mode = self._modes.get(field)
        if mode is None:
            codec = self.decoder.table_codec(field) if isinstance(field, str) and field[:2] != "__" else None
            mode = self._modes[field] = reading_accel.CONVERSIONS.get(codec, 0)  # type: ignore[arg-type]
        return mode

    def _done(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """A complete batch, decoded when there is a decoder: ``decoder.decode_columns`` of its values as read, on
        the values left as bytes only (the others are that codec's value)."""
        raw, self._raw = self._raw, set()
        if self.decoder is None:
            return batch
        context: dict[str, list[Any]] = {name: batch[name] for name in ("__key__", "__url__") if name in batch}
        out = {}
        for field, column in batch.items():
            if not self._mode(field):
                out[field] = self._decode_column(context, field, column)
                continue
            if field in raw:  # converted where simple: decode the others, with their rows' keys
                rows = [i for i, value in enumerate(column) if value.__class__ is not str and value.__class__ is not int]
                part: dict[str, list[Any]] = {name: [values[i] for i in rows] for name, values in context.items()}
                for i, value in zip(rows, self._decode_column(part, field, [column[i] for i in rows]), strict=True):
                    column[i] = value
            out[field] = column
        return out

    def _decode_column(self, context: dict[str, list[Any]], field: str, column: list[Any]) -> list[Any]:
        batch = dict(context)
        batch[field] = column
        return self.decoder.decode_columns(batch)[field]

    def _add_all(self, samples: Iterable[dict[str, Any]]) -> Iterator[dict[str, list[Any]]]:
        for sample in samples:
            done = self.add(sample)
            if done is not None:
                yield done
