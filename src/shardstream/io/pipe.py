"""``pipe:CMD``: read a shard from the standard output of a shell command.

``pipe:CMD`` **runs CMD in a shell** (``/bin/sh -c CMD``), exactly like ``subprocess.Popen(CMD, shell=True)``.
That is the point of the scheme (``pipe:curl -s -L https://host/shard.tar``, ``pipe:gsutil cat gs://b/s.tar``,
``pipe:ssh host cat s.tar``), and it is safe only because the URL is your own argument: never build a
``pipe:`` URL from data you did not write yourself.

The command's exit status is checked when its output ends: a non-zero status raises
:class:`~shardstream.errors.OpenError` naming the URL, the status and the tail of the command's stderr, so a
failed download is never mistaken for a short shard. When the reader stops early (a ``break``, an exception,
garbage collection), the command and its children are killed.

>>> with open_pipe("pipe:printf hello") as f: f.read()
b'hello'
>>> f = open_pipe("pipe:echo oops >&2; exit 3")
>>> f.read()
Traceback (most recent call last):
...
shardstream.errors.OpenError: 'pipe:echo oops >&2; exit 3': the command exited with status 3; its stderr ends with: oops
>>> f.close()
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
from typing import IO, cast

from ..errors import OpenError

__all__ = ["PipeStream", "open_pipe"]

_STDERR_TAIL = 2000  # bytes of stderr kept for the error message
_MAX_DRAIN = 16 << 20  # finish() reads at most this much trailing output before giving up on the exit status


class PipeStream(io.RawIOBase):
    """The standard output of a shell command as a readable binary stream (see the module docstring)."""

    def __init__(self, url: str, command: str, *, bufsize: int = 1 << 20):
        self.url, self.command = url, command
        self._posix = os.name == "posix"
        # stderr is a bare pipe that the drainer thread owns (reads with os.read, closes at its end): a daemon
        # thread blocked in a *buffered* reader's read holds that reader's lock, and closing the reader at
        # interpreter shutdown (a stream collected then) would wait for that lock: "Fatal Python error:
        # _enter_buffered_busy", exit status 134. A bare fd has no lock; nothing else reads or closes it.
        err_read, err_write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                command,
                shell=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err_write,
                bufsize=bufsize,
                start_new_session=self._posix,  # its own process group: close() can kill the command's children too
            )
        except BaseException:
            os.close(err_read)
            raise
        finally:
            os.close(err_write)
        # a buffered pipe (bufsize != 0), typed IO[bytes] by typeshed: it has read1/readinto1
        self._out = cast("io.BufferedReader | None", self._proc.stdout)
        self._tail = bytearray()
        self._checked = False
        # the thread holds the fd and the tail, not self: a stream dropped unclosed is still collected (and closed)
        self._drainer = threading.Thread(
            target=_drain_stderr, args=(err_read, self._tail), name="shardstream-pipe-stderr", daemon=True
        )
        try:
            self._drainer.start()
        except BaseException:
            os.close(err_read)
            self._kill()
            self._proc.wait()
            raise

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes, returning what the command has written so far rather than waiting for all of
        them (like a socket); ``b""`` only at the end of the output, after checking the exit status."""
        assert self._out is not None
        data = self._out.read() if size is None or size < 0 else self._out.read1(size)
        if not data and size != 0:
            self._check_exit()
        return data

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        assert self._out is not None
        n = self._out.readinto1(b)
        if n == 0 and len(b) > 0:
            self._check_exit()
        return n

    def _check_exit(self) -> None:
        """At the end of the output: wait for the command; a non-zero status raises OpenError."""
        if self._checked:
            return
        self._checked = True
        code = self._proc.wait()
        self._drainer.join(timeout=5)  # the command ended: its stderr ends too, unless a child it left holds it
        if code == 0:
            return
        status = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        tail = bytes(self._tail).decode("utf-8", "replace").strip()
        detail = f"; its stderr ends with: {tail}" if tail else " (nothing on stderr)"
        raise OpenError(f"{self.url!r}: the command {status}{detail}", url=self.url)

    def finish(self) -> None:
        """The reader is done: drain what is left of the output, then check the exit status (see module doc)."""
        assert self._out is not None
        drained = 0
        while drained <= _MAX_DRAIN:
            chunk = self._out.read(1 << 16)
            if not chunk:
                self._check_exit()
                return
            drained += len(chunk)

    def close(self) -> None:
        """Kill the command (and its process group) if it is still running, and release the pipes."""
        if self.closed:
            return
        try:
            if self._proc.poll() is None:
                self._kill()
            self._proc.wait()
        finally:
            if self._out is not None:
                self._out.close()
            if not sys.is_finalizing():  # at shutdown the thread cannot run again: joining would only wait
                self._drainer.join(timeout=5)
            super().close()

    def _kill(self) -> None:
        try:
            if self._posix:
                os.killpg(self._proc.pid, signal.SIGKILL)
            else:  # pragma: no cover - not POSIX
                self._proc.kill()
        except (ProcessLookupError, PermissionError):
            pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"PipeStream({self.url!r}, pid={self._proc.pid})"


def _drain_stderr(fd: int, tail: bytearray) -> None:
    """Read a command's stderr (the bare pipe ``fd``, which this thread owns and closes) to its end, keeping the
    last ``_STDERR_TAIL`` bytes in ``tail``."""
    try:
        while chunk := os.read(fd, 4096):
            tail += chunk
            del tail[:-_STDERR_TAIL]
    except OSError:  # pragma: no cover - a pipe's read end does not fail
        pass
    finally:
        os.close(fd)


def open_pipe(url: str) -> IO[bytes]:
    """Open ``pipe:CMD``: start ``CMD`` in a shell and return its stdout as a :class:`PipeStream`."""
    command = url[len("pipe:") :] if url[:5].lower() == "pipe:" else url
    if not command.strip():
        raise OpenError(f"{url!r}: pipe: URL has an empty command", url=url)
    return PipeStream(url, command)  # type: ignore[return-value]
