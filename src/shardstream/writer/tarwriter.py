"""TarWriter: one WebDataset tar, all or nothing (see :mod:`shardstream.writer`)."""

from __future__ import annotations

import os
import secrets
import sys
import time
import weakref
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from ..config import get_settings
from ..errors import ConfigError, EncodeError, WriteError
from ..io.remote_write import open_for_write
from ..io.urls import local_path
from ..tar.writer import DEFAULT_OWNER, TarStreamWriter
from ._targets import PathOrFile, _cleanup, _compression, _compressor, _Counter, _open_file, _publish
from .encoding import Encoded, SampleEncoder
from .records import WrittenIndex

__all__ = ["TarWriter"]


class TarWriter:
    """Write samples (dicts) into one tar archive; webdataset's ``TarWriter``, deterministic and all-or-nothing.

    Each sample becomes the members ``KEY.FIELD`` (fields in sorted order). Field values are encoded by extension
    with :func:`shardstream.codecs.encode_sample` (``encoder=True``: numpy arrays and PIL images to ``.jpg``/
    ``.png``/``.npy``..., ints to ``.cls``, objects to ``.json``/``.pyd``...); bytes and str pass through
    unchanged (str as UTF-8; under a ``.gz`` extension the codecs gzip them unless they already are gzip data).
    ``encoder=False`` accepts only bytes and str; a callable receives the whole sample and returns the encoded
    one. Fields starting with ``_`` (such as ``__url__``) are dropped unless
    ``keep_meta=True``, which writes them too (they must be str or bytes).

    :param fileobj: a path (``"dest.tar"``, ``"file:dest.tar"``, ``"-"`` for stdout) or an open binary stream.
        A path is written under a temporary name and renamed into place by :meth:`close`; a stream is written
        directly and never closed (the caller owns it). An object store URL (``"s3://bucket/dest.tar"``,
        ``gs://``, ``az://``...) is uploaded and published only by :meth:`close` (an abort discards the upload);
        ``"pipe:CMD"`` writes to the standard input of a shell command (see :mod:`shardstream.io.remote_write`).
    :param user: user name of the members (webdataset's default ``"bigdata"``)
    :param group: group name of the members
    :param mode: permission bits of the members
    :param compress: None (infer from the path's ending: ``.gz``/``.tgz``, ``.bz2``, ``.xz``, ``.zst``), False
        (never), True or ``"gz"``, ``"bz2"``, ``"xz"``, ``"zst"`` (needs ``pip install 'shardstream[zstd]'``)
    :param encoder: True (by extension), False (bytes/str only), a callable ``sample -> sample``, or a dict
        ``{ext: value -> bytes}`` (those extensions by the functions, the others by the table)
    :param keep_meta: also write the fields whose names start with ``_`` (except the reader's ``__key__`` and
        ``__url__``, which readers refuse as members: :class:`~shardstream.errors.ReservedFieldError`)
    :param mtime: modification time of every member; 0 by default so output is reproducible (None: now)
    :param format: accepted for webdataset compatibility and ignored: shardstream always writes ustar headers
        and adds PAX records only for members ustar cannot express
    :param jpeg_quality: JPEG quality used when encoding images to ``.jpg`` (None: the codec's default)
    :param compresslevel: compression level (defaults: gzip 6, bz2 9, xz 6, zstd 3)
    :param record_index: record ``(key, [(field, data_offset, size), ...])`` per sample in
        :attr:`index_entries`, offsets counted in the uncompressed tar (for building an index while writing)
    :param fsync: path targets: flush the shard and its directory to disk around the rename (default
        ``SHARDSTREAM_FSYNC``, on), so a power loss never leaves a short shard under its final name

    >>> import io, tarfile
    >>> stream = io.BytesIO()
    >>> with TarWriter(stream, encoder=False, record_index=True) as sink:
    ...     sink.write({"__key__": "a/b", "png": b"\\x89PNG...", "output.cls": "7"})
    2048
    >>> tarfile.open(fileobj=io.BytesIO(stream.getvalue())).getnames()
    ['a/b.output.cls', 'a/b.png']
    >>> sink.index_entries
    [('a/b', [('output.cls', 512, 1), ('png', 1536, 7)])]
    """

    def __init__(
        self,
        fileobj: PathOrFile,
        user: str = DEFAULT_OWNER,
        group: str = DEFAULT_OWNER,
        mode: int = 0o444,
        compress: bool | str | None = None,
        encoder: bool | Callable[[dict], Mapping] | Mapping[str, Callable[[Any], bytes]] | None = True,
        keep_meta: bool = False,
        mtime: float | None = 0,
        format: Any = None,
        *,
        jpeg_quality: int | None = None,
        compresslevel: int | None = None,
        record_index: bool = False,
        fsync: bool | None = None,
    ):
        del format  # accepted for webdataset compatibility (see the docstring)
        if encoder is None:
            encoder = False
        if not (encoder is True or encoder is False or callable(encoder) or isinstance(encoder, Mapping)):
            raise ConfigError(
                f"encoder must be True, False, a callable sample -> sample or a dict ext -> function, got {encoder!r}"
            )
        if mtime is None:  # webdataset's way of asking for the current time
            mtime = int(time.time())
        self.encoder, self.keep_meta, self.jpeg_quality = encoder, keep_meta, jpeg_quality
        self._encoder = SampleEncoder(encoder, keep_meta, jpeg_quality)
        #: with ``record_index=True``: what was written, as numbers (see :attr:`index_entries`)
        self.index_record: WrittenIndex | None = WrittenIndex() if record_index else None
        self.path: str | None = None  # final path, for path targets
        self.fsync = False  # path targets: see the docstring
        self._tmp: str | None = None
        self._raw: Any = None  # the file this writer opened (path targets only)
        self._remote: Any = None  # the RemoteSink this writer opened (URL targets only)
        self._finalizer: Any = None
        self._previous_key: str | None = None
        self._failed = False
        self.closed = False

        stream: Any
        if isinstance(fileobj, (str, os.PathLike)):
            path = os.fspath(fileobj)
            if not isinstance(path, str):
                raise ConfigError(f"TarWriter needs a str path or a binary stream, got {fileobj!r}")
            local = path if path == "-" else local_path(path)
            remote = local is None  # s3://, gs://... and pipe:CMD: see shardstream.io.remote_write
            path = path if remote else local  # type: ignore[assignment]
            kind = _compression(compress, path)
            if remote:
                stream = self._remote = open_for_write(path)  # published by close(), discarded by abort()
                self.url = path
            elif path == "-":
                stream = sys.stdout.buffer
                self.url = "-"
            else:
                self.path = self.url = path
                self.fsync = get_settings().fsync if fsync is None else bool(fsync)
                stream = self._raw = self._open_temp(path)
                self._finalizer = weakref.finalize(self, _cleanup, self._raw, self._tmp or "")
        else:
            if not hasattr(fileobj, "write"):
                raise ConfigError(f"TarWriter needs a path or a binary stream with .write(), got {fileobj!r}")
            kind = _compression(compress, None)
            stream = fileobj
            self.url = str(getattr(fileobj, "name", "<stream>"))
        self.compress = kind
        self._counter = _Counter(stream) if kind else None
        self._synced_at = 0  # tar bytes known to be in compressed_bytes (see _sync)
        try:
            self._compressor = _compressor(kind, self._counter, compresslevel) if kind else None  # type: ignore
            self.tarstream = TarStreamWriter(
                self._compressor or stream, mtime=mtime, mode=mode, uname=user, gname=group  # type: ignore[arg-type]
            )
        except BaseException:
            self._discard()
            raise

    def _open_temp(self, path: str) -> Any:
        directory, name = os.path.split(path)
        if directory:  # a missing folder is made, as open(path, "wb") in it would need
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as e:
                raise self._write_error(e, "could not create the folder of") from e
        for _ in range(100):
            tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
            try:  # created like open(path, "wb") would (0o666 less the umask), unlike mkstemp's 0o600
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            except FileExistsError:
                continue
            except OSError as e:
                raise self._write_error(e, "could not create a temporary file next to") from e
            self._tmp = tmp
            return _open_file(fd)
        raise WriteError(f"could not find a free temporary name next to {path!r}", url=path)  # pragma: no cover

    def _write_error(self, e: OSError, doing: str = "could not write") -> WriteError:
        reason = e.strerror or str(e) or type(e).__name__
        after = "; no partial file was left under that name" if self._raw is not None else ""
        err = WriteError(f"{doing} {self.url!r}: {reason}{after}", url=self.url)
        err.errno = e.errno  # keep `e.errno == errno.ENOSPC` checks working
        return err

    def _encode(self, sample: Mapping[str, Any]) -> Encoded:
        """Validate and encode a sample, before anything is written (a bad sample leaves the archive intact)."""
        return self._encoder.encode(sample)

    @property
    def index_entries(self) -> list[tuple[str, list[tuple[str, int, int]]]] | None:
        """With ``record_index=True``: ``(key, [(field, data_offset, size), ...])`` per sample written; else None."""
        return None if self.index_record is None else self.index_record.entries()

    # -- writing -----------------------------------------------------------------------------------------------

    def write(self, obj: Mapping[str, Any]) -> int:
        """Encode and append one sample; returns the bytes it added to the (uncompressed) tar.

        >>> import io
        >>> TarWriter(io.BytesIO()).write({"__key__": "k", "txt": "hello", "cls": 3})
        2048
        """
        return self._write_encoded(self._encode(obj))

    def _write_encoded(self, encoded: Encoded) -> int:
        offsets = self._add(encoded.key, encoded.members)
        if self.index_record is not None:
            self.index_record.add(encoded.key, encoded.fields, offsets, encoded.sizes)
        self._previous_key = encoded.key
        return encoded.nbytes  # the members' headers, data and padding: what add_many appended

    def _write_packed(self, keys: list[str], fields: tuple[str, ...], members: list, sizes: list[int]) -> None:
        """Append samples packed by :func:`~shardstream.writer.batches.pack_batch` (keys checked there; the
        first against the previous sample's here), all in one call."""
        offsets = self._add(keys[0], members)
        if self.index_record is not None:
            self.index_record.add_many(keys, fields, offsets, sizes)
        self._previous_key = keys[-1]

    def _add(self, first_key: str, members: list) -> list[int]:
        if self.closed or self._failed:
            raise ConfigError(f"TarWriter for {self.url!r} is closed or failed; create a new one")
        if first_key == self._previous_key:
            raise EncodeError(
                f"sample {first_key!r} has the same __key__ as the previous sample; readers would merge the two "
                "into one sample: give every sample its own key"
            )
        try:
            return self.tarstream.add_many(members)
        except OSError as e:
            self._discard()
            raise self._write_error(e) from e
        except BaseException:  # e.g. KeyboardInterrupt mid-sample: the archive is broken, never publish it
            self._discard()
            raise

    @property
    def bytes_written(self) -> int:
        """Bytes of uncompressed tar produced so far (the final size once closed, for uncompressed output)."""
        return self.tarstream.bytes_written

    @property
    def compressed_bytes(self) -> int | None:
        """Compressed bytes handed to the file so far (None for uncompressed output); exact once closed."""
        return None if self._counter is None else self._counter.count

    def _sync(self) -> bool:
        """Push all tar bytes so far through the compressor so that :attr:`compressed_bytes` is exact.

        Returns False where the compressor cannot do that without ending its stream (bz2, xz). For gzip this is
        a zlib sync flush, for zstd the end of a block: a few bytes each, and the output stays deterministic.
        """
        comp = self._compressor
        if comp is None:
            return True
        if self.compress not in ("gz", "zst"):
            return False
        try:
            self.tarstream.flush()
            if self.compress == "gz":
                comp.flush(zlib.Z_SYNC_FLUSH)
            else:
                import zstandard  # noqa: PLC0415 - optional: shardstream[zstd]

                comp.flush(zstandard.FLUSH_BLOCK)
        except OSError as e:
            self._discard()
            raise self._write_error(e) from e
        self._synced_at = self.tarstream.bytes_written
        return True

    def close(self) -> None:
        """End the archive, flush, and (for a path) rename the temporary file into place.

        On failure the temporary file is removed and :class:`~shardstream.errors.WriteError` is raised. A stream
        passed in is flushed, not closed. Calling ``close`` again does nothing.
        """
        if self.closed:
            return
        if self._failed:
            self.closed = True
            return
        try:
            self.tarstream.close()
            if self._compressor is not None:
                self._compressor.close()
            if self._raw is not None:
                _publish(self._raw, self._tmp, self.path, self.fsync)  # type: ignore[arg-type]
                self._finalizer.detach()
                self._tmp = None
            elif self._remote is not None:
                self._remote.close()  # publishes the object (completes the multipart upload) or checks the command
            else:  # the caller's stream: flush it, never close it
                flush = getattr(self._counter.fileobj if self._counter else self.tarstream.fileobj, "flush", None)
                if flush is not None:
                    flush()
        except OSError as e:
            self._discard()
            raise self._write_error(e) from e
        except BaseException:
            self._discard()
            raise
        self.closed = True

    def abort(self) -> None:
        """Give up: remove the temporary file (path targets), write nothing more. The stream of a caller is left as is.

        >>> import os
        >>> sink = TarWriter("never.tar")
        >>> _ = sink.write({"__key__": "a", "txt": "x"})
        >>> sink.abort()
        >>> os.path.exists("never.tar")
        False
        """
        if not self.closed:
            self._discard()
            self.closed = True

    def _discard(self) -> None:
        self._failed = True
        if self._counter is not None:
            self._counter.discarded = True  # the compressor's trailer, written when it is collected, goes nowhere
        if self._remote is not None:
            try:
                self._remote.discard()  # aborts the upload / kills the command: nothing is published
            except Exception:  # pragma: no cover - the original error matters more
                pass
        if self._raw is not None:
            try:
                self._raw.close()
            except OSError:
                pass
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass
            self._tmp = None
        if self._finalizer is not None:
            self._finalizer.detach()

    def __enter__(self) -> TarWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
