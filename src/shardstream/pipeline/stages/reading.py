"""From shard URLs to samples: open each shard, read its members, group them into samples.

``tarfile_to_samples()`` is the stage; ``url_opener``, ``tar_file_expander`` and ``group_by_keys`` are
webdataset's three steps as plain generators, for pipelines written against them.

Errors: a shard that cannot be opened or read (``OpenError``, ``TarFormatError``, a ``pipe:`` command that
exits non-zero) and an ill-formed sample (``SampleFormatError``) go to ``handler`` with the shard URL (and
key) attached. The handler skips (True) or stops the whole stream (False), or raises (default).

>>> import io, tarfile
>>> with tarfile.open("tiny.tar", "w") as tf:
...     for name, data in [("a.txt", b"x"), ("a.cls", b"1"), ("b.txt", b"y")]:
...         info = tarfile.TarInfo(name); info.size = len(data); tf.addfile(info, io.BytesIO(data))
>>> [sorted(s) for s in tarfile_to_samples()([{"url": "tiny.tar"}])]
[['__key__', '__url__', 'cls', 'txt'], ['__key__', '__url__', 'txt']]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...errors import StateError
from ...io import finish_stream, open_url
from ...reading import ColumnRequest, ColumnRun, iter_samples, with_local_path
from ...redact import redact
from ...resume.fields import MAX_COUNT, field, within
from ...samples import KeyRule, group_samples
from ...tar import iter_tar
from ...tar.compress import map_tar
from ...tar.reader import iter_members_mapped
from ..bases import Chunks
from ..core import stage
from ..cursors import Cursor, require
from ..error_handlers import annotate, reraise_exception
from .next_shard import END, UpstreamAhead, url_of
from .shards import ShardReading, local_file

__all__ = ["group_by_keys", "tar_file_expander", "tarfile_chunks", "tarfile_samples", "tarfile_to_samples", "url_opener",
           "url_of"]

Handler = Callable[[BaseException], bool]
Member = tuple[str, bytes | memoryview, int]


def _members(stream: Any, url: str, select_files: Callable[[str], bool] | None,
             rename_files: Callable[[str], str] | None, zero_copy: bool = False) -> Iterator[Member]:
    mapped = map_tar(stream) if zero_copy else None
    members = iter_tar(stream, url) if mapped is None else iter_members_mapped(mapped, url)
    if select_files is None and rename_files is None:
        yield from members
        return
    for name, data, offset in members:
        if rename_files is not None:
            name = rename_files(name)
        if select_files is not None and not select_files(name):
            continue
        yield name, data, offset


def _tarfile_samples(source: Iterable[Any], handler: Handler = reraise_exception,
                     select_files: Callable[[str], bool] | None = None,
                     rename_files: Callable[[str], str] | None = None, keys: Any = None,
                     opener: Callable[[str], Any] | None = None,
                     zero_copy: bool = False, local_paths: bool = False) -> Iterator[dict[str, Any]]:
    """Read each shard of a shard list (``{"url": ...}`` items or URL strings) and yield its samples.

    ``select_files(name) -> bool`` keeps only some members, ``rename_files(name) -> name`` renames them before
    grouping; ``keys`` is the key rule (``"first-dot"``, ``"last-dot"``, a regex, or a callable
    ``name -> (key, ext)``, see :class:`shardstream.samples.KeyRule`). ``opener(url) -> binary stream`` opens
    the shards instead of :func:`shardstream.io.open_url` (e.g. a :class:`shardstream.io.cache.ShardCache`).

    ``zero_copy=True`` memory-maps the shards that are uncompressed local files and gives their fields as
    read-only ``memoryview`` objects into the map instead of ``bytes`` copies (other shards are read as usual): see
    :func:`shardstream.samples.iter_samples` and docs/performance.md. ``Decoder`` decodes such views; ``bytes(v)``
    copies one; a view cannot be pickled, so decode or copy fields before they leave a DataLoader worker.

    ``local_paths=True`` adds ``__local_path__`` to the samples of shards read from a local file (the file, or
    its copy in the shard cache), as webdataset's ``WebDataset`` does (``WebDataset`` sets it).
    """
    yield from _read_shards(source, handler, select_files, rename_files, keys, opener, zero_copy, False, local_paths)


def _read_shards(source: Iterable[Any], handler: Handler, select_files: Callable[[str], bool] | None,
                 rename_files: Callable[[str], str] | None, keys: Any, opener: Callable[[str], Any] | None,
                 zero_copy: bool, chunks: bool, local_paths: bool = False,
                 request: ColumnRequest | None = None) -> Iterator[Any]:
    """``tarfile_to_samples``' loop; with ``chunks``, lists of consecutive samples (see ``iter_samples``), and
    :class:`~shardstream.reading.ColumnRun` chunks while ``request`` asks for columns."""
    rule = None if keys is None else keys if isinstance(keys, KeyRule) else KeyRule(keys)
    reading = ShardReading(handler)

    def read(stream: Any, url: str) -> Iterator[Any]:
        local = local_file(url, opener) if local_paths else None
        if select_files is None and rename_files is None:  # the C walk + grouping, when built
            return iter_samples(stream, url, rule=rule, handler=reading.on_sample_error, zero_copy=zero_copy,
                                chunks=chunks, columns=request, local_path=local)
        members = _members(stream, url, select_files, rename_files, zero_copy)
        grouped = group_samples(members, url, rule=rule, handler=reading.on_sample_error)
        samples = ([sample] for sample in grouped) if chunks else grouped
        return samples if local is None else with_local_path(samples, local, chunks)

    for out in reading.run(source, read, opener, local_paths, partials=True):
        yield [out] if chunks and isinstance(out, dict) else out  # a partial last sample comes alone


class ReaderCursor(Chunks, Cursor):
    """``tarfile_to_samples`` as a cursor: its position is the shard being read (the shard list's position
    before it) and the samples yielded from it. Restoring opens that shard again and skips those samples: the
    only data read twice is the current shard's beginning. Going forward inside the open shard (what a shuffle
    buffer's restore does) reads on without reopening.

    The shard is read in chunks (the samples one C pass grouped), served one by one by ``next()`` or several at
    a time by :meth:`take`; the reading goes on when a chunk is used up, as it would sample by sample."""

    def __init__(self, upstream: Cursor, handler: Handler = reraise_exception,
                 select_files: Callable[[str], bool] | None = None, rename_files: Callable[[str], str] | None = None,
                 keys: Any = None, opener: Callable[[str], Any] | None = None, zero_copy: bool = False,
                 local_paths: bool = False, *, name: str):
        """The arguments of :func:`tarfile_to_samples` (``name`` is given by the pipeline)."""
        self._begin(upstream, handler, name)
        self.select_files, self.rename_files, self.keys, self.opener = select_files, rename_files, keys, opener
        self.zero_copy, self.local_paths = bool(zero_copy), bool(local_paths)

    def _begin(self, upstream: Cursor, handler: Handler | None, name: str) -> None:
        """What every shard reader's cursor starts with (its reading options are its own)."""
        self.upstream, self.handler, self.name = upstream, handler, name
        self.restorable = upstream.restorable
        self._samples: Iterator[Any] | None = None
        self._chunk: list[dict[str, Any]] = []
        self._run: ColumnRun | None = None  # the chunk, when it is rows as columns (then _chunk is empty)
        self._i = 0  # the next sample of the chunk
        self._request = ColumnRequest()  # set by take_columns while it reads a chunk
        self._shard: Any = None  # the shard list's mark before the current shard
        self._url: str | None = None
        self._count, self._stopped, self._stop = 0, False, [False]
        self._next = UpstreamAhead(upstream, self)  # the next shard, taken ahead (its reader opens it ahead)

    def _watched(self) -> tuple[Callable[[BaseException], bool], list[bool]]:
        """The handler, and a flag it sets when the handler ends the shard (for a reader of one shard)."""
        handler, stop = self.handler or reraise_exception, [False]

        def watched(exn: BaseException) -> bool:
            keep = handler(exn)
            stop[0] = stop[0] or not keep
            return keep

        return watched, stop

    def _open(self, item: Any) -> None:
        watched, stop = self._watched()
        self._close()
        self._samples = _read_shards(self._next.one_shard(item), watched, self.select_files, self.rename_files,
                                     self.keys, self.opener, self.zero_copy, True, self.local_paths, self._request)
        self._stop, self._url, self._count = stop, url_of(item), 0

    def _close(self) -> None:
        self._chunk, self._run, self._i = [], None, 0
        if self._samples is not None:
            self._samples.close()  # type: ignore[attr-defined]
            self._samples = None

    def _fill(self) -> bool:
        """The next chunk (opening the next shards as needed); False at the end."""
        if self._run is not None and self._i < self._run.rows:  # the samples of these rows are not dicts
            raise StateError(f"{self.name}: samples asked for one by one inside rows taken as columns")
        while not self._stopped:
            if self._samples is None:
                mark, item = self._next.take()
                if item is END:
                    return False
                self._open(item)
                self._shard = mark
            try:
                self._set(next(self._samples))  # type: ignore[arg-type]
                return True
            except StopIteration:
                self._samples, self._chunk, self._run, self._stopped = None, [], None, self._stop[0]
        return False

    def _set(self, chunk: Any) -> None:
        if chunk.__class__ is ColumnRun:
            self._chunk, self._run = [], chunk
        else:
            self._chunk, self._run = chunk, None
        self._i = 0

    def _size(self) -> int:
        """The number of samples in the chunk."""
        return len(self._chunk) if self._run is None else self._run.rows

    # next(): Chunks serves self._chunk[self._i] (advancing _i and _count), and calls _fill() at the end of a chunk
    __next__ = Chunks.__next__

    def take(self, n: int) -> list[dict[str, Any]]:
        """The next samples, at most ``n`` (fewer at the end of a chunk; none at the end of the stream): what
        ``n`` calls of ``next()`` would give, up to the end of the chunk."""
        if self._i >= len(self._chunk) and not self._fill():
            return []
        i = self._i
        out = self._chunk[i:i + n]
        self._i = i + len(out)
        self._count += len(out)
        return out

    def take_columns(self, n: int, want: tuple[tuple[str, ...], bytes, bool]) -> tuple[list[list[Any]] | None,
                                                                                     list[dict[str, Any]]]:
        """The next samples, at most ``n``, as :meth:`take` gives them, or as columns: ``(columns, [])`` where
        ``columns[j]`` holds wanted field j of each sample (converted), or ``(None, samples)``; ``(None, [])`` at
        the end. ``want`` is ``(fields, modes, exact)`` (``scan_columns`` in ``_scan_columns.c``): a sample that lacks a
        field, has others too (with ``exact``) or has a value that does not convert simply comes as a dict, as do
        the samples of shards the C grouping does not read. The position (``_count``) is the same either way."""
        run = self._run
        if run is None or self._i >= run.rows:
            if self._i < len(self._chunk):
                return None, self.take(n)
            self._request.want = want
            try:
                if not self._fill():
                    return None, []
            finally:
                self._request.want = None
            run = self._run
            if run is None:
                return None, self.take(n)
        i = self._i
        k = min(n, run.rows - i)
        self._i = i + k
        self._count += k
        return [column[i:i + k] for column in run.columns], []

    def give_back(self, n: int) -> None:
        """Undo the taking of the last ``n`` samples of the latest :meth:`take` (they come again)."""
        self._i -= n
        self._count -= n

    def mark(self) -> tuple[Any, ...]:
        if self._samples is None:
            return (self._next.mark(), None, 0, self._stopped)
        return (self._shard, self._url, self._count, self._stopped)

    def state_at(self, mark: tuple[Any, ...]) -> dict[str, Any]:
        return {"upstream": self.upstream.state_at(mark[0]), "url": mark[1], "sample": mark[2], "stopped": mark[3]}

    def state_dict(self) -> dict[str, Any]:
        return self.state_at(self.mark())

    def load_state_dict(self, state: Any) -> None:
        what = self.name
        state = require(state, ("upstream", "url", "sample", "stopped"), what)
        url = field(state, "url", str, none=True, what=what)
        count = field(state, "sample", int, lo=0, hi=0 if url is None else MAX_COUNT, what=what)
        stopped = field(state, "stopped", bool, what=what)
        same = (url is not None and self._samples is not None and url == self._url and count >= self._count
                and self.upstream.state_at(self._shard) == state["upstream"])
        if not same:
            self._close()
            self._next.forget()
            with within("upstream"):
                self.upstream.load_state_dict(state["upstream"])
            self._stopped = stopped
            if url is None:
                return
            self._shard = self.upstream.mark()
            item = next(self.upstream, None)
            if item is None or url_of(item) != url:
                raise StateError(f"cannot restore {self.name}: the shard list now gives "
                                 f"{None if item is None else redact(url_of(item))!r} where the state read "
                                 f"{redact(url)!r} (its 'url')")
            self._open(item)
        while self._count < count:  # the current shard's first samples, read again
            if self._i >= self._size():
                try:
                    self._set(next(self._samples))  # type: ignore[arg-type]
                except StopIteration:
                    raise StateError(f"cannot restore {self.name}: shard {redact(url)!r} has {self._count} samples, "
                                     f"the state says {count} were read") from None
            step = min(count - self._count, self._size() - self._i)
            self._i += step
            self._count += step


tarfile_to_samples = stage(_tarfile_samples, name="tarfile_to_samples", fluid=False, state=ReaderCursor,
                           reads_shards=True)
tarfile_samples = _tarfile_samples


def tarfile_chunks(source: Iterable[Any], keys: Any = None,
                   opener: Callable[[str], Any] | None = None) -> Iterator[list[dict[str, Any]]]:
    """``tarfile_samples(source, keys=keys, opener=opener)`` as lists of consecutive samples (as many as one C
    pass grouped): the same samples and errors, for readers that take several samples at once.

    >>> import io, tarfile
    >>> with tarfile.open("three.tar", "w") as tf:
    ...     for name in ("a.txt", "b.txt", "c.txt"):
    ...         info = tarfile.TarInfo(name); info.size = 1; tf.addfile(info, io.BytesIO(b"x"))
    >>> [s["__key__"] for chunk in tarfile_chunks(["three.tar"]) for s in chunk]
    ['a', 'b', 'c']
    """
    return _read_shards(source, reraise_exception, None, None, keys, opener, False, True)


def url_opener(data: Iterable[Any], handler: Handler = reraise_exception, **kw: Any) -> Iterator[dict[str, Any]]:
    """webdataset step 1: ``{"url": u}`` -> ``{"url": u, "stream": binary stream}``."""
    for item in data:
        sample = dict(item) if isinstance(item, dict) else {"url": url_of(item)}
        try:
            sample["stream"] = open_url(sample["url"])
        except Exception as exn:
            annotate(exn, url=sample["url"])
            if handler(exn):
                continue
            return
        yield sample


def tar_file_expander(data: Iterable[dict[str, Any]], handler: Handler = reraise_exception,
                      select_files: Callable[[str], bool] | None = None,
                      rename_files: Callable[[str], str] | None = None, eof_value: Any = None,
                      **kw: Any) -> Iterator[dict[str, Any]]:
    """webdataset step 2: ``{"url", "stream"}`` -> ``{"fname", "data", "__url__"}`` for each member.
    ``eof_value`` is accepted for webdataset compatibility: members are grouped shard by shard, so no end-of-shard
    marker is needed between shards."""
    for source in data:
        url, stream = source["url"], source["stream"]
        try:
            for name, content, _ in _members(stream, url, select_files, rename_files):
                yield {"fname": name, "data": content, "__url__": url}
            finish_stream(stream)
        except Exception as exn:
            annotate(exn, url=url)
            if not handler(exn):
                return
        finally:
            stream.close()


def group_by_keys(data: Iterable[dict[str, Any]], keys: Any = None, lcase: bool = True, suffixes: Any = None,
                  handler: Handler | None = None) -> Iterator[dict[str, Any]]:
    """webdataset step 3: group ``{"fname", "data", "__url__"}`` members into samples (per shard)."""
    rule = KeyRule(keys if keys is not None else "first-dot", lowercase=lcase)
    for url, members in itertools.groupby(data, key=lambda m: m["__url__"]):
        picked = ((m["fname"], m["data"], 0) for m in members
                  if suffixes is None or rule.split(m["fname"])[1] in suffixes)
        yield from group_samples(picked, url, rule=rule, handler=handler)
