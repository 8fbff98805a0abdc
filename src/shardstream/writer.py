"""Writing WebDataset shards: :class:`TarWriter` (one tar) and :class:`ShardWriter` (a numbered series of tars).

Both are drop-in replacements for webdataset's classes of the same names (``import shardstream as wds``) and
add what a dataset build needs:

- **deterministic bytes**: the same samples give the same archive, byte for byte (mtime 0, uid/gid 0, user and
  group ``"bigdata"``, mode ``0o444``; see :mod:`shardstream.tar.writer`); compressed shards too (gzip with
  mtime 0 and no file name in its header);
- **all or nothing**: a path target is written under a hidden temporary name in the same directory
  (``.NAME.XXXXXXXX.tmp``) and renamed into place only by a successful :meth:`TarWriter.close`; after an
  exception (in the ``with`` block, a full disk, an interrupt) no file exists under the final name;
- **a fixed member order**: the members of a sample are ``KEY.FIELD`` for its fields in sorted order
  (Python string order of the field names, as webdataset writes them);
- **checked samples**: every sample needs a ``__key__`` (a non-empty string without NUL); field names must be
  non-empty strings that neither start with ``.`` nor contain ``/`` or NUL; a key equal to the previous
  sample's is refused, since the two samples would merge into one when read back;
- **exact shard sizes**: :class:`ShardWriter` counts the real bytes of each shard (headers, padding and the
  end of the archive included), so no finished uncompressed shard is larger than ``maxsize``.

>>> import tarfile
>>> with TarWriter("dest.tar") as sink:
...     for index in range(3):
...         _ = sink.write({"__key__": "sample%06d" % index, "txt": f"text {index}", "cls": str(index)})
>>> tarfile.open("dest.tar").getnames()[:4]
['sample000000.cls', 'sample000000.txt', 'sample000001.cls', 'sample000001.txt']
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import secrets
import sys
import warnings
import weakref
import zlib
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, NamedTuple, Union

from .codecs import encode_sample
from .errors import ConfigError, EncodeError, MissingDependencyError, WriteError
from .tar.header import BLOCKSIZE
from .tar.writer import DEFAULT_OWNER, PAX_SIZE_LIMIT, TarStreamWriter, archive_size, member_size

__all__ = ["ShardInfo", "ShardWriter", "TarWriter"]

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]
_BYTES = (bytes, bytearray, memoryview)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
# Compression inferred from a path's ending (only when ``compress`` is None).
_SUFFIXES = {
    ".gz": "gz", ".tgz": "gz", ".bz2": "bz2", ".tbz": "bz2", ".tbz2": "bz2",
    ".xz": "xz", ".txz": "xz", ".zst": "zst", ".zstd": "zst", ".tzst": "zst",
}  # fmt: skip
_COMPRESSIONS = {"gz": "gz", "gzip": "gz", "bz2": "bz2", "xz": "xz", "zst": "zst", "zstd": "zst"}
#: Room left for what closing a compressed shard adds (compressed end-of-archive zeros, stream trailer).
_END_MARGIN = 512
#: Default levels: gzip 6 (zlib's default: nearly the size of level 9, several times faster), bz2 9, xz 6, zstd 3.
_LEVELS = {"gz": 6, "bz2": 9, "xz": 6, "zst": 3}


def _compression(compress: bool | str | None, path: str | None) -> str | None:
    """Normalize ``compress`` (None infers from the path's ending, like webdataset infers ``.gz``)."""
    if compress is None:
        if path is None:
            return None
        lowered = path.lower()
        return next((kind for suffix, kind in _SUFFIXES.items() if lowered.endswith(suffix)), None)
    if compress is False or compress == "":
        return None
    if compress is True:
        return "gz"
    kind = _COMPRESSIONS.get(compress.lower()) if isinstance(compress, str) else None
    if kind is None:
        raise ConfigError(f"compress={compress!r} is not one of None, False, True, 'gz', 'bz2', 'xz', 'zst'")
    return kind


class _Counter:
    """Counts the bytes a compressor writes to the underlying stream (and completes partial raw writes)."""

    def __init__(self, fileobj: Any):
        self.fileobj, self.count = fileobj, 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            written = self.fileobj.write(view)
            if written is None:
                break
            view = view[written:]
        self.count += total
        return total

    def flush(self) -> None:
        flush = getattr(self.fileobj, "flush", None)
        if flush is not None:
            flush()


def _compressor(kind: str, sink: _Counter, level: int | None) -> Any:
    level = _LEVELS[kind] if level is None else level
    if kind == "gz":  # mtime 0 and no file name: the gzip header is the same on every run
        return gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=level, mtime=0)  # type: ignore
    if kind == "bz2":
        return bz2.BZ2File(sink, "wb", compresslevel=level)  # type: ignore[arg-type]
    if kind == "xz":
        return lzma.LZMAFile(sink, "wb", preset=level)  # type: ignore[arg-type]
    try:
        import zstandard
    except ImportError:
        raise MissingDependencyError("writing .tar.zst", "zstd", "zstandard") from None
    return zstandard.ZstdCompressor(level=level).stream_writer(sink, closefd=False)


def _open_file(fd: int) -> Any:
    """The file a path TarWriter writes to: unbuffered, since TarStreamWriter buffers (no second copy)."""
    return os.fdopen(fd, "wb", buffering=0)


def _cleanup(raw: Any, tmp: str) -> None:
    """Finalizer of a path TarWriter that was never closed: drop its temporary file."""
    try:
        raw.close()
    except OSError:
        pass
    try:
        os.unlink(tmp)
    except OSError:
        pass
    warnings.warn(f"TarWriter for {tmp!r} was never closed; its temporary file was removed", ResourceWarning, 2)


class _Encoded(NamedTuple):
    """One sample ready to write: its key, ``(field, member name, data)`` in member order, and its tar bytes."""

    key: str
    members: list[tuple[str, bytes, Any]]
    nbytes: int


def _field_error(key: str, field: Any, problem: str) -> EncodeError:
    return EncodeError(f"sample {key!r}: field {field!r} {problem}")


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
    :param keep_meta: also write the fields whose names start with ``_`` (except ``__key__``)
    :param mtime: modification time of every member; 0 by default so output is reproducible (None: now)
    :param format: accepted for webdataset compatibility and ignored: shardstream always writes ustar headers
        and adds PAX records only for members ustar cannot express
    :param jpeg_quality: JPEG quality used when encoding images to ``.jpg`` (None: the codec's default)
    :param compresslevel: compression level (defaults: gzip 6, bz2 9, xz 6, zstd 3)
    :param record_index: record ``(key, [(field, data_offset, size), ...])`` per sample in
        :attr:`index_entries`, offsets counted in the uncompressed tar (for building an index while writing)

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
    ):
        del format  # accepted for webdataset compatibility (see the docstring)
        if encoder is None:
            encoder = False
        if not (encoder is True or encoder is False or callable(encoder) or isinstance(encoder, Mapping)):
            raise ConfigError(
                f"encoder must be True, False, a callable sample -> sample or a dict ext -> function, got {encoder!r}"
            )
        if mtime is None:  # webdataset's way of asking for the current time
            import time

            mtime = int(time.time())
        self.encoder, self.keep_meta, self.jpeg_quality = encoder, keep_meta, jpeg_quality
        self.index_entries: list[tuple[str, list[tuple[str, int, int]]]] | None = [] if record_index else None
        self.path: str | None = None  # final path, for path targets
        self._tmp: str | None = None
        self._raw: Any = None  # the file this writer opened (path targets only)
        self._remote: Any = None  # the RemoteSink this writer opened (URL targets only)
        self._finalizer: Any = None
        self._previous_key: str | None = None
        self._suffixes: dict[str, bytes] = {}  # checked field names -> b"." + UTF-8 name
        self._failed = False
        self.closed = False

        if isinstance(fileobj, (str, os.PathLike)):
            path = os.fspath(fileobj)
            if not isinstance(path, str):
                raise ConfigError(f"TarWriter needs a str path or a binary stream, got {fileobj!r}")
            remote = False
            if path.startswith("file:"):
                path = path[7:] if path.startswith("file://") else path[5:]
            elif _SCHEME.match(path):
                remote = True  # s3://, gs://... and pipe:CMD: see shardstream.io.remote_write
            kind = _compression(compress, path)
            if remote:
                from .io.remote_write import open_for_write

                stream = self._remote = open_for_write(path)  # published by close(), discarded by abort()
                self.url = path
            elif path == "-":
                stream: Any = sys.stdout.buffer
                self.url = "-"
            else:
                self.path = self.url = path
                stream = self._raw = self._open_temp(path)
                self._finalizer = weakref.finalize(self, _cleanup, self._raw, self._tmp)
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

    # -- encoding ----------------------------------------------------------------------------------------------

    def _encode(self, sample: Mapping[str, Any]) -> _Encoded:
        """Validate and encode a sample, before anything is written (a bad sample leaves the archive intact)."""
        if sample.__class__ is not dict and not isinstance(sample, Mapping):
            raise EncodeError(f"a sample must be a dict of fields, got {type(sample).__name__}")
        key = sample.get("__key__")
        if key is None:
            raise EncodeError(
                f"sample without '__key__' (fields {sorted(map(str, sample))}); every sample needs a unique key, "
                "e.g. {'__key__': 'sample%06d' % index, ...}"
            )
        if not isinstance(key, str) or not key or "\0" in key:
            raise EncodeError(f"__key__ must be a non-empty str without NUL, got {key!r}")
        encoder = self.encoder
        fields: dict[str, Any]
        if encoder is True or encoder is False:  # fast path: bytes and str pass through, as encode_sample does
            fields = {}
            for name, value in sample.items():
                if not isinstance(name, str):
                    raise _field_error(key, name, "is not a str")
                if name[:1] == "_":
                    continue
                if encoder is True and name[-2:].lower() == "gz":
                    value = None  # encode_sample gzips under .gz: let it
                if isinstance(value, _BYTES):
                    fields[name] = value
                elif isinstance(value, str):
                    fields[name] = value.encode("utf-8")
                else:  # something to encode: leave the whole sample to the codecs (one table for both ways)
                    fields = self._encode_fields(sample, key)
                    break
        else:
            fields = self._encode_fields(sample, key)
        if self.keep_meta:
            for name, value in sample.items():
                if isinstance(name, str) and name[:1] == "_" and name != "__key__":
                    if isinstance(value, str):
                        value = value.encode("utf-8")
                    elif not isinstance(value, _BYTES):
                        problem = f"is metadata and must be str or bytes, not {type(value).__name__}"
                        raise _field_error(key, name, problem)
                    fields[name] = value
        members = []
        nbytes = 0
        suffixes = self._suffixes
        key_bytes = key.encode("utf-8", "surrogateescape")
        try:
            names = sorted(fields)
        except TypeError:  # names of mixed types
            raise _field_error(key, next(n for n in fields if not isinstance(n, str)), "is not a str") from None
        for name in names:
            suffix = suffixes.get(name)
            if suffix is None:
                suffix = self._check_field(key, name)
            data = fields[name]
            if data.__class__ is not bytes:
                if isinstance(data, str):
                    data = data.encode("utf-8")
                elif isinstance(data, _BYTES):
                    data = memoryview(data).cast("B")
                else:
                    raise _field_error(key, name, f"was encoded to {type(data).__name__}, not bytes")
            member = key_bytes + suffix
            size = len(data)
            if len(member) <= 100 and size < PAX_SIZE_LIMIT:  # one ustar block (what member_size says, inlined)
                nbytes += BLOCKSIZE + size + (-size % BLOCKSIZE)
            else:
                nbytes += member_size(member, size)
            members.append((name, member, data))
        return _Encoded(key, members, nbytes)

    def _check_field(self, key: str, name: Any) -> bytes:
        """Validate a field name; returns (and caches) the member name suffix ``b"." + name``."""
        if not isinstance(name, str):
            raise _field_error(key, name, "is not a str")
        if not name or name[0] == "." or "/" in name or "\0" in name:
            hint = f"; write {name.lstrip('.')!r}" if name[:1] == "." and name.lstrip(".") else ""
            raise _field_error(key, name, f"is not a valid field name: it must be non-empty, not start with '.' "
                               f"and contain no '/' or NUL{hint}")  # fmt: skip
        suffix = b"." + name.encode("utf-8", "surrogateescape")
        if len(self._suffixes) < 4096:
            self._suffixes[name] = suffix
        return suffix

    def _encode_fields(self, sample: Mapping[str, Any], key: str) -> dict[str, Any]:
        try:
            encoded = encode_sample(sample, encoder=self.encoder, jpeg_quality=self.jpeg_quality)
        except (EncodeError, MissingDependencyError):  # they already name the sample and the field
            raise
        except Exception as e:  # a custom encoder failed: say which sample
            raise EncodeError(f"sample {key!r}: the encoder failed: {type(e).__name__}: {e}") from e
        return {name: value for name, value in encoded.items() if not (isinstance(name, str) and name[:1] == "_")}

    # -- writing -----------------------------------------------------------------------------------------------

    def write(self, obj: Mapping[str, Any]) -> int:
        """Encode and append one sample; returns the bytes it added to the (uncompressed) tar.

        >>> import io
        >>> TarWriter(io.BytesIO()).write({"__key__": "k", "txt": "hello", "cls": 3})
        2048
        """
        return self._write_encoded(self._encode(obj))

    def _write_encoded(self, encoded: _Encoded) -> int:
        if self.closed or self._failed:
            raise ConfigError(f"TarWriter for {self.url!r} is closed or failed; create a new one")
        if encoded.key == self._previous_key:
            raise EncodeError(
                f"sample {encoded.key!r} has the same __key__ as the previous sample; readers would merge the two "
                "into one sample: give every sample its own key"
            )
        tar = self.tarstream
        start = tar.bytes_written
        try:
            offsets = tar.add_many([(member, data) for _, member, data in encoded.members])
            if self.index_entries is not None:
                entry = [(field, offset, len(data)) for (field, _, data), offset in zip(encoded.members, offsets)]
                self.index_entries.append((encoded.key, entry))
        except OSError as e:
            self._discard()
            raise self._write_error(e) from e
        except BaseException:  # e.g. KeyboardInterrupt mid-sample: the archive is broken, never publish it
            self._discard()
            raise
        self._previous_key = encoded.key
        return tar.bytes_written - start

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
                import zstandard

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
                self._raw.close()
                os.replace(self._tmp, self.path)  # type: ignore[arg-type]
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
    :param verbose: print a line per shard to stderr
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
        _compression(kw.get("compress"), pattern)  # a bad compress= fails now, not at the first sample
        # a template writer: validates kw now and encodes samples before a shard is chosen (sizes decide it)
        self._encoder = TarWriter(_NullSink(), **{**kw, "compress": False})
        #: per finished shard path, the TarWriter's index entries (only with ``record_index=True``)
        self.index_entries: dict[str, list] | None = {} if kw.get("record_index") else None
        self._bar: Any = None
        if progress:
            from tqdm.auto import tqdm

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
        encoded = self._encoder._encode(obj)
        if self.tarstream is not None and self.count > 0:
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
        if self.verbose:
            print(f"# writing {self.fname} ({self.total} samples so far)", file=sys.stderr)

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
        nbytes = writer.compressed_bytes if writer.compress else writer.bytes_written
        self.shards.append(path)
        if self.index_entries is not None:
            self.index_entries[path] = writer.index_entries or []
        self.shard_info.append(ShardInfo(path, self.count, nbytes))  # type: ignore[arg-type]
        if self.verbose:
            print(f"# finished {path}: {self.count} samples, {nbytes / 1e6:.1f} MB", file=sys.stderr)
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
