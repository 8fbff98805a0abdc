"""ShardWriter: a numbered series of WebDataset tars of bounded size (see :mod:`shardstream.writer`)."""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import Any, BinaryIO, NamedTuple

from ..errors import ConfigError, EncodeError, WriteError
from ..logs import log_to_stderr
from ..redact import redacting_logger
from ..tar.header import BLOCKSIZE
from ..tar.writer import RECORDSIZE, archive_size
from ._targets import _END_MARGIN, _compression
from .batches import SampleBatch, pack_batch
from .records import EntriesView, WrittenIndex
from .tarwriter import TarWriter

__all__ = ["ShardInfo", "ShardWriter"]

logger = redacting_logger(__name__)
_PACK_BYTES = 1 << 19  # write_batch packs at most this many bytes per call (one sample may be more): a
# buffer of a few MiB, made anew after each write, cost 4x the system time of writing the shard (page faults)


class ShardInfo(NamedTuple):
    """One finished shard: its path, its number of samples and its size on disk in bytes."""

    path: str
    samples: int
    bytes: int


_PATTERN_HINT = "use e.g. 'out-%06d.tar' or 'out-{shard:06d}.tar'"


def _shard_name(pattern: str, shard: int) -> str:
    try:
        if "%" in pattern:
            return pattern % shard
        if "{" in pattern:
            return pattern.format(shard, shard=shard)
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise ConfigError(f"bad shard pattern {pattern!r}: {e}; {_PATTERN_HINT}") from e
    raise ConfigError(f"shard pattern {pattern!r} has no shard number; {_PATTERN_HINT}")


class ShardWriter:
    """Write samples into a series of shards ``pattern % 0, pattern % 1, ...``; webdataset's ``ShardWriter``.

    A new shard starts when the next sample would make the current one exceed ``maxcount`` samples or ``maxsize``
    bytes. The size is the real size on disk: headers, padding and the end of the archive included, so every
    finished uncompressed shard is at most ``maxsize`` bytes, except a single sample bigger than that, which
    gets a shard of its own. Compressed shards count compressed bytes: for gzip and zstd the count is made exact
    with a sync flush when a shard nears ``maxsize`` (a few bytes each, a handful of times per shard), so they
    stay within ``maxsize`` too (with 512 bytes and 0.1% of room for the end of the stream and incompressible
    data). bz2 and xz cannot flush without ending their stream: there the test is compressed bytes written so
    far plus the next sample's uncompressed size, and a shard can exceed ``maxsize`` by what the compressor still
    holds (up to 900 kB for bz2, a few MB for xz).

    Each shard is a :class:`TarWriter` on its path (temporary file, renamed on completion). ``post(path)`` is
    called with the final path after each shard is complete. After an exception inside the ``with`` block the
    shard in progress is removed; completed shards stay. Shards are opened on the first sample they receive, so
    writing nothing creates no file.

    :param pattern: ``"out-%06d.tar"`` (``%`` formatting, as webdataset) or ``"out-{shard:06d}.tar"``
    :param maxcount: most samples per shard
    :param maxsize: most bytes per shard
    :param post: called with each finished shard's path (e.g. to upload it)
    :param start_shard: number of the first shard
    :param verbose: show the INFO lines it logs per shard on stderr (:mod:`shardstream.logs`)
    :param opener: ``opener(path) -> binary stream`` to write shards somewhere else than local files (e.g.
        ``lambda p: fsspec.open(p, "wb").open()``); the stream is closed when its shard is complete, and thrown
        away with its ``discard()`` method, where it has one, after an error. All-or-nothing is then up to it.
    :param progress: show a tqdm progress bar of samples written
    :param total: the number of samples expected, for the progress bar (optional)
    :param kw: passed to :class:`TarWriter` (``encoder``, ``compress``, ``mtime``, ``keep_meta``...)

    Attributes as in webdataset: ``shard`` (the next shard number), ``fname`` (current shard path), ``count``
    (samples in the current shard), ``size`` (its bytes so far), ``total`` (samples written in all); and
    :attr:`shards` (finished shard paths) and :attr:`shard_info` (:class:`ShardInfo` per finished shard).

    >>> import os
    >>> with ShardWriter("out-%06d.tar", maxcount=2) as sink:
    ...     for index in range(5):
    ...         _ = sink.write({"__key__": "sample%06d" % index, "cls": index})
    >>> sink.shards
    ['out-000000.tar', 'out-000001.tar', 'out-000002.tar']
    >>> [info.samples for info in sink.shard_info], sink.total
    ([2, 2, 1], 5)
    """

    def __init__(
        self,
        pattern: str,
        maxcount: int = 100000,
        maxsize: float = 3e9,
        post: Callable[[str], Any] | None = None,
        start_shard: int = 0,
        verbose: int = 0,
        opener: Callable[[str], BinaryIO] | None = None,
        *,
        progress: bool = False,
        total: int | None = None,
        **kw: Any,
    ):
        if isinstance(maxcount, bool) or not isinstance(maxcount, int) or maxcount < 1:
            raise ConfigError(f"maxcount must be an int >= 1, got {maxcount!r}")
        if isinstance(maxsize, bool) or not isinstance(maxsize, (int, float)) or not maxsize > 0:
            raise ConfigError(f"maxsize must be a positive number of bytes, got {maxsize!r}")
        if post is not None and not callable(post):
            raise ConfigError(f"post must be a callable taking the shard path, got {post!r}")
        if opener is not None and not callable(opener):
            raise ConfigError(f"opener must be a callable shard path -> binary stream, got {opener!r}")
        if not isinstance(pattern, (str, os.PathLike)):
            raise ConfigError(f"pattern must be a str like 'out-%06d.tar', got {pattern!r}")
        pattern = os.fspath(pattern)
        if _shard_name(pattern, start_shard) == _shard_name(pattern, start_shard + 1):
            raise ConfigError(f"shard pattern {pattern!r} gives every shard the same name; use e.g. 'out-%06d.tar'")
        self.pattern, self.maxcount, self.maxsize, self.post = pattern, maxcount, maxsize, post
        self.verbose, self.kw, self.opener = verbose, kw, opener
        self._stream: Any = None  # the stream opener() returned for the current shard
        self.shard = start_shard
        self.fname: str | None = None
        self.count = 0
        self.size = 0
        self.total = 0
        self.tarstream: TarWriter | None = None
        self.shards: list[str] = []
        self.shard_info: list[ShardInfo] = []
        self._plain = _compression(kw.get("compress"), pattern) is None  # a bad compress= fails now
        # a template writer: validates kw now and encodes samples before a shard is chosen (sizes decide it)
        self._encoder = TarWriter(_NullSink(), **{**kw, "compress": False})
        self._encode = self._encoder._encoder.encode
        #: per finished shard path, what its TarWriter recorded as numbers (only with ``record_index=True``)
        self.index_records: dict[str, WrittenIndex] | None = {} if kw.get("record_index") else None
        #: per finished shard path, the TarWriter's index entries (only with ``record_index=True``)
        self.index_entries = None if self.index_records is None else EntriesView(self.index_records)
        self._bar: Any = None
        if progress:
            from tqdm.auto import tqdm  # noqa: PLC0415 - a heavy import that only progress bars need

            self._bar = tqdm(desc=os.path.basename(pattern), unit=" samples", total=total)
        self.closed = False

    def _would_exceed(self, nbytes: int) -> bool:
        writer = self.tarstream
        assert writer is not None
        if self.count >= self.maxcount:
            return True
        if writer.compress is None:
            return archive_size(writer.bytes_written + nbytes) > self.maxsize
        # Compressed: an upper bound first (tar bytes the compressor may still hold counted uncompressed, plus a
        # margin for incompressible data and the end of the stream); only when that is too much, make the count
        # exact with a sync flush (gzip, zstd; a handful of times per shard) and test again.
        def bound(pending: int) -> float:
            return writer.compressed_bytes + (pending + nbytes) * 1.001 + _END_MARGIN  # type: ignore[operator]

        if bound(writer.bytes_written - writer._synced_at) <= self.maxsize:
            return False
        if writer._sync():
            return bound(0) > self.maxsize
        return writer.compressed_bytes + nbytes > self.maxsize  # type: ignore[operator]  # bz2, xz: approximate

    def write(self, obj: Mapping[str, Any]) -> int:
        """Write one sample, starting a new shard first if it would not fit; returns its tar bytes."""
        if self.closed:
            raise ConfigError("this ShardWriter is closed; create a new one")
        encoded = self._encode(obj)
        writer = self.tarstream
        if writer is not None and self.count > 0:
            if writer.compress is None and self.count < self.maxcount:  # the common case, _would_exceed inlined
                full = archive_size(writer.bytes_written + encoded.nbytes) > self.maxsize
            else:
                try:
                    full = self._would_exceed(encoded.nbytes)
                except BaseException:  # a failed sync flush: the shard is broken
                    self._lost()
                    raise
            if full:
                self.finish()
        if self.tarstream is None:
            self._open()
        writer = self.tarstream
        assert writer is not None
        try:
            written = writer._write_encoded(encoded)
        except EncodeError:  # refused before anything was written (a repeated key): the shard is intact
            raise
        except BaseException:
            self._lost()
            raise
        self.count += 1
        self.total += 1
        self.size = writer.bytes_written
        if self._bar is not None:
            self._bar.update(1)
        return written

    def write_batch(self, batch: SampleBatch) -> int:
        """Write the samples of a :class:`~shardstream.writer.batches.SampleBatch` (columns of bytes or str); the
        shards are those :meth:`write` makes of each sample, byte for byte, with less work per sample. Returns
        the tar bytes written.

        >>> from shardstream.writer.batches import SampleBatch
        >>> with ShardWriter("cols-%03d.tar", maxcount=2) as sink:
        ...     _ = sink.write_batch(SampleBatch(["a", "b", "c"], ("txt",), [["x", "y", "z"]]))
        >>> sink.shards, sink.total
        (['cols-000.tar', 'cols-001.tar'], 3)
        """
        if self.closed:
            raise ConfigError("this ShardWriter is closed; create a new one")
        encoder = self._encoder
        packed = pack_batch(batch, encoder=encoder.encoder, keep_meta=encoder.keep_meta) if self._plain else None
        if packed is None:
            return sum(self.write(sample) for sample in batch.samples())
        keys, fields, members, sizes, nbytes = packed
        width, n, start = len(fields), len(keys), 0
        ends = list(accumulate(nbytes))  # ends[i]: bytes of samples 0..i
        fit = int(self.maxsize) // RECORDSIZE * RECORDSIZE - 2 * BLOCKSIZE  # archive_size(x) <= maxsize: x <= fit
        while start < n:
            if self.tarstream is None:
                self._open()
            writer = self.tarstream
            assert writer is not None
            done = ends[start - 1] if start else 0
            # the samples that fit this shard (write()'s test, sample after sample, on the running sums)
            stop = bisect_right(ends, fit - writer.bytes_written + done, start, min(n, start + self.maxcount - self.count))
            if stop == start:
                if self.count > 0:
                    self.finish()
                    continue
                stop = start + 1  # a sample bigger than maxsize: a shard of its own, as write() does
            stop = min(stop, max(start + 1, bisect_right(ends, done + _PACK_BYTES, start, stop)))
            try:
                writer._write_packed(keys[start:stop], fields, members[start * width : stop * width],
                                     sizes[start * width : stop * width])  # fmt: skip
            except EncodeError:  # a key equal to the previous sample's, refused before anything was written
                raise
            except BaseException:
                self._lost()
                raise
            self.count += stop - start
            self.total += stop - start
            self.size = writer.bytes_written
            if self._bar is not None:
                self._bar.update(stop - start)
            start = stop
        return ends[-1]

    def _open(self) -> None:
        self.fname = _shard_name(self.pattern, self.shard)
        if self.opener is None:
            self.tarstream = TarWriter(self.fname, **self.kw)
        else:
            kw = {**self.kw, "compress": _compression(self.kw.get("compress"), self.fname)}
            self._stream = self.opener(self.fname)
            try:
                self.tarstream = TarWriter(self._stream, **kw)
            except BaseException:
                self._drop_stream(discard=True)
                raise
        self.shard += 1
        self.count = self.size = 0
        self._say("writing %s (%d samples so far)", self.fname, self.total)

    def _say(self, message: str, *args: Any) -> None:
        if self.verbose:
            log_to_stderr()
        logger.info(message, *args)

    def _drop_stream(self, *, discard: bool) -> None:
        """Close the stream opener() gave (or throw it away, where it can: fsspec files have ``discard()``)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            end = getattr(stream, "discard", None) if discard else None
            end = end or getattr(stream, "close", None)
            if end is not None:
                end()

    def _lost(self) -> None:
        """The shard in progress failed or was abandoned: remove it, reuse its number, forget its samples."""
        if self.tarstream is not None:
            self.tarstream.abort()
            self.tarstream = None
            try:
                self._drop_stream(discard=True)
            except Exception:  # pragma: no cover - the original error matters more
                pass
            self.shard -= 1
            self.total -= self.count
            self.count = self.size = 0

    def next_stream(self) -> None:
        """Finish the current shard (if any) and open the next one now (webdataset compatibility)."""
        self.finish()
        self._open()

    def finish(self) -> None:
        """Finish the current shard: close it, rename it into place, record it, call ``post``."""
        writer = self.tarstream
        if writer is None:
            return
        try:
            writer.close()
            self._drop_stream(discard=False)
        except WriteError:
            self._lost()
            raise
        except OSError as e:  # closing the opener's stream failed
            self._lost()
            raise writer._write_error(e) from e
        except BaseException:
            self._lost()
            raise
        self.tarstream = None
        path = writer.path or self.fname or writer.url
        nbytes = (writer.compressed_bytes or 0) if writer.compress else writer.bytes_written
        self.shards.append(path)
        if self.index_records is not None:
            self.index_records[path] = writer.index_record or WrittenIndex()
        self.shard_info.append(ShardInfo(path, self.count, nbytes))
        self._say("finished %s: %d samples, %.1f MB", path, self.count, nbytes / 1e6)
        if self.post is not None:
            self.post(path)

    def close(self) -> None:
        """Finish the last shard. Calling it again does nothing."""
        if self.closed:
            return
        try:
            self.finish()
        finally:
            self.closed = True
            if self._bar is not None:
                self._bar.close()

    def abort(self) -> None:
        """Remove the shard in progress (finished shards stay) and stop."""
        if not self.closed:
            self._lost()
            self.closed = True
            if self._bar is not None:
                self._bar.close()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class _NullSink:
    """A stream that discards everything (for the encoding-only template writer of ShardWriter)."""

    name = "<template>"

    def write(self, data: Any) -> int:
        return len(data)
