"""Writing shards to object stores and commands: the targets of ``TarWriter("s3://...")`` and ``pipe:``.

:func:`open_for_write` returns a :class:`RemoteSink`: a binary stream whose ``close()`` *publishes* the shard
and whose ``discard()`` throws it away. For fsspec URLs (``s3://``, ``gs://``, ``az://``...) the object appears
only when it is complete: s3fs uploads a large shard in parts (multipart upload, one part per
``SHARDSTREAM_BLOCK_SIZE``, at least 5 MiB) and completes the upload in ``close()``; ``discard()`` aborts it,
and a sink dropped without ``close()`` (an exception, garbage collection) is discarded too, never published.

``pipe:CMD`` runs ``CMD`` in a shell with the shard on its standard input (``pipe:aws s3 cp - s3://b/x.tar``,
``pipe:ssh host 'cat > x.tar'``); a non-zero exit status is a :class:`~shardstream.errors.WriteError` naming
the command's stderr. Whether a failed command leaves a partial file is up to the command.

>>> with open_for_write("pipe:cat > out.bin") as sink:
...     _ = sink.write(b"hello")
>>> open("out.bin", "rb").read()
b'hello'
>>> sink = open_for_write("pipe:cat > /dev/null; echo no space >&2; exit 2")
>>> sink.close()
Traceback (most recent call last):
...
shardstream.errors.WriteError: 'pipe:cat > /dev/null; echo no space >&2; exit 2': the command exited with status 2; its stderr ends with: no space
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
import weakref
from typing import TYPE_CHECKING, Any, cast

from .._lazy import lazy_module
from ..config import get_settings
from ..errors import ConfigError, WriteError
from .registry import split_scheme

if TYPE_CHECKING:
    from . import objectstore
else:
    objectstore = lazy_module("shardstream.io.objectstore")  # fsspec's side loads with its first URL

__all__ = ["RemoteSink", "open_for_write"]

_MIN_PART = 5 << 20  # S3's smallest part
_FSSPEC_SCHEMES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "hf"}


class RemoteSink(io.RawIOBase):
    """A write-only stream with an explicit outcome: ``close()`` publishes, ``discard()`` abandons."""

    url = "<remote>"

    def writable(self) -> bool:
        return True

    def discard(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def __del__(self) -> None:
        """Dropped without ``close()``: discard (``io.IOBase`` would call ``close()``, publishing a partial shard)."""
        if not self.closed:
            try:
                self.discard()
            except Exception:  # pragma: no cover - interpreter shutdown
                pass


def _abandon(file: Any) -> None:
    """Abort an fsspec upload and mark its file closed, so that its ``__del__`` cannot publish it."""
    try:
        file.discard()
    except Exception:  # pragma: no cover - best effort: the upload is abandoned anyway
        pass
    file.closed = True


class FsspecSink(RemoteSink):
    """An fsspec file opened for writing (``close()`` commits, ``discard()`` aborts the upload)."""

    def __init__(self, url: str, file: Any):
        self.url, self._file = url, file
        self._abandon = weakref.finalize(self, _abandon, file)

    def write(self, data: Any) -> int:
        try:
            return self._file.write(data)
        except Exception as e:
            self.discard()
            raise WriteError(f"could not write {self.url!r}: {type(e).__name__}: {e}", url=self.url) from e

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._file.close()  # completes the multipart upload (or the single PUT of a small shard)
            self._abandon.detach()
        except Exception as e:
            self._abandon()
            raise WriteError(f"could not finish {self.url!r}: {type(e).__name__}: {e}; the object was not "
                             "published", url=self.url) from e
        finally:
            super().close()

    def discard(self) -> None:
        self._abandon()
        super().close()


class PipeSink(RemoteSink):
    """The standard input of a shell command (``pipe:CMD``); its exit status is checked by ``close()``."""

    def __init__(self, url: str, command: str):
        self.url, self.command = url, command
        self._proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, start_new_session=os.name == "posix")
        self._tail = bytearray()
        # the thread holds the pipe and the tail, not the sink: a sink dropped unclosed is collected (and its
        # command killed) rather than kept alive by its own stderr reader
        err = cast("io.BufferedReader", self._proc.stderr)  # a buffered pipe (default bufsize): has read1
        self._reader = threading.Thread(target=_drain, args=(err, self._tail), name="shardstream-pipe-stderr",
                                        daemon=True)
        self._reader.start()
        self._abandon = weakref.finalize(self, _kill, self._proc)

    def _failure(self, code: int | None) -> WriteError:
        self._reader.join(timeout=5)
        status = "did not take all the data" if code in (0, None) else (
            f"was killed by signal {-code}" if code < 0 else f"exited with status {code}")
        tail = self._tail.decode("utf-8", "replace").strip()
        detail = f"; its stderr ends with: {tail}" if tail else " (nothing on stderr)"
        return WriteError(f"{self.url!r}: the command {status}{detail}", url=self.url)

    def write(self, data: Any) -> int:
        try:
            self._proc.stdin.write(data)  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError, OSError) as e:
            code = self._proc.wait()
            self.discard()
            raise self._failure(code) from e
        return memoryview(data).nbytes

    def close(self) -> None:
        if self.closed:
            return
        try:
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()  # type: ignore[union-attr]
            code = self._proc.wait()
            self._abandon.detach()
            if code != 0:
                raise self._failure(code)
        finally:
            super().close()

    def discard(self) -> None:
        self._abandon()
        with contextlib.suppress(OSError):
            self._proc.stdin.close()  # type: ignore[union-attr]
        super().close()


def _drain(err: io.BufferedReader, tail: bytearray) -> None:
    """Keep the last 2,000 bytes a command writes on stderr (for the message if it fails)."""
    for chunk in iter(lambda: err.read1(4096), b""):
        tail += chunk
        del tail[:-2000]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL) if os.name == "posix" else proc.kill()
    proc.wait()


def open_for_write(url: str, **options: Any) -> RemoteSink:
    """A :class:`RemoteSink` for ``url``: an fsspec URL (``s3://bucket/key``...) or ``pipe:CMD``.

    ``options`` go to the fsspec filesystem, after the storage settings of the URL's bucket or prefix.
    """
    scheme, rest = split_scheme(url)
    if scheme == "pipe":
        if not rest.strip():
            raise ConfigError(f"{url!r}: pipe: URL has an empty command")
        return PipeSink(url, rest)
    if scheme not in _FSSPEC_SCHEMES:
        raise ConfigError(f"cannot write shards to {url!r}: writable URLs are local paths, file:, '-', pipe:CMD "
                          f"and {', '.join(sorted(s + '://' for s in _FSSPEC_SCHEMES))}; or write locally and upload each "
                          "finished shard with ShardWriter(post=...)")
    settings = get_settings()
    fs, path = objectstore.filesystem_for(url, settings, **options)
    try:
        file = fs.open(path, "wb", block_size=max(_MIN_PART, settings.block_size))
    except Exception as e:
        raise WriteError(f"could not start writing {url!r}: {type(e).__name__}: {e}", url=url) from e
    return FsspecSink(url, file)
