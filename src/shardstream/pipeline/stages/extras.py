"""webdataset's remaining stages: ``xdecode`` (decoding by glob with stream decoders), ``log_keys``, the
caching stages ``Cached`` / ``LMDBCached`` (fluid ``.mcached()`` / ``.lmdb_cached()``), and ``PipelineStage``,
the base of webdataset's class-based stages. ``shardstream.filters`` and ``shardstream.utils`` re-export them.

>>> samples = [{"__key__": "a", "txt": b"x", "bin": b"\\x00"}]
>>> [sorted(s.items()) for s in xdecode()(samples)]
[[('__key__', 'a'), ('bin', b'\\x00'), ('txt', 'x')]]
>>> cached = Cached(); _ = list(cached(iter([1, 2]))); list(cached(iter([])))
[1, 2]
"""

from __future__ import annotations

import fnmatch
import io
import pickle
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...config import secure_mode, secure_refusal
from ...errors import ConfigError, MissingDependencyError
from ..core import FluidInterface, stage

__all__ = [
    "Cached", "LMDBCached", "PipelineStage", "decode_bin", "decode_pickle", "decode_text", "default_decoders",
    "find_decoder", "log_keys", "xdecode",
]


class PipelineStage:
    """Base of webdataset's class-based stages: ``stage(source)`` runs :meth:`run` (subclasses define
    ``run(self, source)``; older ones ``invoke``).

    >>> class Double(PipelineStage):
    ...     def run(self, source):
    ...         return (2 * x for x in source)
    >>> list(Double()([1, 2]))
    [2, 4]
    """

    def invoke(self, *args: Any, **kw: Any) -> Any:
        """webdataset's older entry point: defaults to :meth:`run`."""
        if type(self).run is PipelineStage.run:
            raise NotImplementedError(f"{type(self).__name__} defines neither run(source) nor invoke(source)")
        return self.run(*args, **kw)

    def run(self, *args: Any, **kw: Any) -> Any:
        """Process the source (``run(source) -> iterator``)."""
        return self.invoke(*args, **kw)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.run(*args, **kw)


def identity(x: Any) -> Any:
    """Return ``x``."""
    return x


def decode_bin(stream: Any) -> bytes:
    """The bytes of a stream."""
    return stream.read()


def decode_text(stream: Any) -> str:
    """The UTF-8 text of a stream."""
    return stream.read().decode("utf-8")


def decode_pickle(stream: Any) -> Any:
    """Unpickle a stream: runs code from the data, so it is not among :data:`default_decoders`; pass it
    explicitly (``xdecode(("*.pyd", decode_pickle))``) for data you trust. Refused in secure mode."""
    if secure_mode():
        raise secure_refusal("unpickle", "unpickling, which runs code from the data", "unset secure mode to allow it")
    return pickle.load(stream)


#: ``(glob, decoder)`` pairs :func:`xdecode` starts from (webdataset's, without ``*.pyd``: no unpickling by default)
default_decoders: list[tuple[str, Callable[[Any], Any]]] = [("*.bin", decode_bin), ("*.txt", decode_text)]


def find_decoder(decoders: Sequence[tuple[str, Any]], path: str) -> Any:
    """The decoder for a field: the last ``(glob, decoder)`` whose glob matches its name (or ``.`` + name);
    identity for ``__*`` fields; None when nothing matches."""
    fname = re.sub(r".*/", "", path)
    if fname.startswith("__"):
        return identity
    for pattern, fun in decoders[::-1]:
        if fnmatch.fnmatch(fname.lower(), pattern) or fnmatch.fnmatch("." + fname.lower(), pattern):
            return fun
    return None


def _xdecode(source: Iterable[dict[str, Any]], *args: tuple[str, Any], must_decode: bool = True,
             defaults: Sequence[tuple[str, Any]] = default_decoders, **kw: Callable[[Any], Any]) -> Iterator[Any]:
    """Decode fields by glob: ``xdecode(("*.png", f), jpg=g)``; decoders get a binary stream. A field no
    decoder matches raises (``must_decode``) or stays bytes; a decoder of ``False`` leaves its fields alone."""
    decoders = [*defaults, *args, *(("*." + k, v) for k, v in kw.items())]
    for sample in source:
        out = {}
        for path, data in sample.items():
            if path.startswith("__"):
                out[path] = data
                continue
            decoder = find_decoder(decoders, path)
            if decoder is False:
                out[path] = data
            elif decoder is None:
                if must_decode:
                    raise ConfigError(f"xdecode: no decoder for field {path!r} of sample {sample.get('__key__')!r}; "
                                      "add one, or pass must_decode=False")
                out[path] = data
            else:
                out[path] = decoder(io.BytesIO(data) if isinstance(data, bytes) else data)
        yield out


xdecode = stage(_xdecode, name="xdecode", state="pass", keeps_count=True)


def _log_keys(source: Iterable[Any], logfile: str | None = None) -> Iterator[Any]:
    """Append ``index, worker, rank, key`` of each sample to ``logfile`` (locked per line); pass them through."""
    if not logfile:
        yield from source
        return
    import fcntl  # noqa: PLC0415 - Unix-only stdlib module

    with open(logfile, "a") as stream:
        for i, sample in enumerate(source):
            line = f"{i}\t{sample.get('__worker__')}\t{sample.get('__rank__')}\t{sample.get('__key__')}\n"
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            try:
                stream.write(line)
                stream.flush()
            finally:
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
            yield sample


log_keys = stage(_log_keys, name="log_keys", state="pass", keeps_count=True)


class Cached(PipelineStage):
    """Remember the samples of the first pass; later passes replay them without reading the source."""

    def __init__(self) -> None:
        super().__init__()
        self.cached: list[Any] | None = None

    def run(self, source: Iterable[Any]) -> Iterator[Any]:
        """The source (first pass, recorded) or the recorded samples."""
        if self.cached is not None:
            yield from self.cached
            return
        recorded = []
        for sample in source:
            recorded.append(sample)
            yield sample
        self.cached = recorded


class LMDBCached(PipelineStage):
    """Like :class:`Cached`, in an LMDB file ``fname`` (extra ``lmdb``), so later runs replay it too.

    Samples are stored with ``pickler`` (``pickle``): the file is a cache this program writes; do not point
    it at a file from elsewhere. Refused in secure mode.
    """

    def __init__(self, fname: str, map_size: float = 1e12, pickler: Any = pickle, chunksize: int = 500):
        try:
            import lmdb  # noqa: PLC0415 - optional dependency (extra lmdb)
        except ImportError:
            raise MissingDependencyError("LMDBCached", "lmdb", "lmdb") from None
        if secure_mode() and pickler is pickle:
            raise secure_refusal("unpickle", "LMDBCached with pickle (it unpickles the samples it stored)",
                                 "pass another pickler= (e.g. one of JSON or msgpack), or unset secure mode")
        self.db = lmdb.open(fname, readonly=False, map_size=int(map_size))
        self.pickler, self.chunksize = pickler, chunksize

    def is_complete(self) -> bool:
        """Whether a full pass has been stored."""
        with self.db.begin(write=False) as txn:
            return txn.get(b"_") is not None

    def add_samples(self, samples: Iterable[tuple[str, Any]]) -> None:
        """Store ``(key, sample)`` pairs."""
        with self.db.begin(write=True) as txn:
            for key, sample in samples:
                txn.put(key.encode(), self.pickler.dumps(sample))

    def run(self, source: Iterable[Any]) -> Iterator[Any]:
        """The stored samples, or the source (stored as it goes by)."""
        if self.is_complete():
            with self.db.begin(write=False) as txn:
                for key, value in txn.cursor():
                    if key != b"_":
                        yield self.pickler.loads(value)
            return
        buffer: list[tuple[str, Any]] = []
        for i, sample in enumerate(source):
            name = (isinstance(sample, dict) and sample.get("__key__")) or str(i)
            buffer.append((name, sample))
            if len(buffer) >= self.chunksize:
                self.add_samples(buffer)
                buffer = []
            yield sample
        self.add_samples(buffer)
        with self.db.begin(write=True) as txn:
            txn.put(b"_", b"1")


def _mcached(self: Any) -> Any:
    """Cache the samples in memory on the first pass; later passes replay them (:class:`Cached`)."""
    return self.compose(Cached())


def _lmdb_cached(self: Any, *args: Any, **kw: Any) -> Any:
    """Cache the samples in an LMDB file (:class:`LMDBCached`, same arguments)."""
    return self.compose(LMDBCached(*args, **kw))


FluidInterface.mcached = _mcached  # type: ignore[method-assign]  # a method of its own, declared in pipeline/_fluid.py
FluidInterface.lmdb_cached = _lmdb_cached  # type: ignore[method-assign]  # as mcached
