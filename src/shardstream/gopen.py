"""webdataset's ``gopen`` module: opening URLs for reading and writing by scheme.

shardstream opens URLs through its opener registry (:mod:`shardstream.io`: native HTTP with retries, object
stores through fsspec, ``pipe:``); the ``gopen_*`` functions here are webdataset's names for those openers, with
webdataset's signature ``(url, mode="rb", bufsize=8192)``. :data:`gopen_schemes` is a live view of the registry:
adding a webdataset-style opener registers it for reading.

>>> with gopen("pipe:echo hello") as f: f.read()
b'hello\\n'
>>> import io
>>> gopen_schemes["demo"] = lambda url, mode="rb", bufsize=8192: io.BytesIO(url.encode())
>>> reader("demo:x").read()
b'demo:x'
>>> del gopen_schemes["demo"]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, MutableMapping
from typing import IO, Any

from .config import secure_mode, secure_refusal
from .errors import ConfigError, OpenError
from .io import gopen, known_schemes, open_for_writing, open_url, register_opener, unregister_opener
from .io.local import path_of
from .io.registry import get_opener
from .io.rewrite import rewrite_url

__all__ = [
    "Pipe", "gopen", "gopen_ais", "gopen_curl", "gopen_error", "gopen_file", "gopen_gsutil", "gopen_hf",
    "gopen_htgs", "gopen_pipe", "gopen_schemes", "info", "reader", "rewrite_url", "set_options",
]

#: free-form information about the running process (webdataset prints it when GOPEN_VERBOSE is set)
info: dict[str, Any] = {}


class Pipe:
    """A command's standard output (``mode="rb"``) or input (``mode="wb"``) as a stream.

    ``args`` and ``kw`` go to :class:`subprocess.Popen`; an exit status that is neither 0 nor in
    ``ignore_status`` raises :class:`~shardstream.errors.OpenError` when the stream is closed (unless
    ``ignore_errors``). Refused in secure mode.

    >>> with Pipe(["printf", "abc"], mode="rb") as p: p.read()
    b'abc'
    """

    def __init__(self, *args: Any, mode: str | None = None, timeout: float = 7200.0, ignore_errors: bool = False,
                 ignore_status: list[int] | None = None, **kw: Any):
        if secure_mode():
            raise secure_refusal("command", f"running the command {args[0] if args else kw.get('args')!r}",
                                 "unset secure mode to run it")
        if mode not in ("rb", "wb", "r", "w"):
            raise ConfigError(f"Pipe mode must be 'rb' or 'wb', not {mode!r}")
        self.ignore_errors, self.ignore_status, self.timeout = ignore_errors, list(ignore_status or []), timeout
        self.args = (args, kw)
        self.status: int | None = None
        self.handler: Any = None
        kw.pop("bufsize", None)
        if mode[0] == "r":
            self.proc = _popen(args, kw, "stdout")
            stream = self.proc.stdout
        else:
            self.proc = _popen(args, kw, "stdin")
            stream = self.proc.stdin
        if stream is None:
            raise OpenError(f"{args}: the command has no pipe to {mode}")
        self.stream: IO[Any] = stream

    def __str__(self) -> str:
        return f"<Pipe {self.args}>"

    def check_status(self) -> None:
        """Raise if the command has exited with a status that is not accepted."""
        status = self.proc.poll()
        if status is not None:
            self.wait_for_child()

    def wait_for_child(self) -> None:
        """Wait for the command; raise :class:`OpenError` for a status that is not 0 or ignored."""
        if self.status is not None:
            return
        self.status = self.proc.wait(self.timeout)
        if self.status not in (0, *self.ignore_status) and not self.ignore_errors:
            raise OpenError(f"{self.args}: the command exited with status {self.status}")

    def read(self, *args: Any, **kw: Any) -> bytes:
        """Read from the command's output."""
        result = self.stream.read(*args, **kw)
        self.check_status()
        return result

    def write(self, *args: Any, **kw: Any) -> int:
        """Write to the command's input."""
        result = self.stream.write(*args, **kw)
        self.check_status()
        return result

    def readLine(self, *args: Any, **kw: Any) -> bytes:  # noqa: N802 - webdataset's name
        """Read one line of the command's output."""
        result = self.stream.readline(*args, **kw)
        self.check_status()
        return result

    def close(self) -> None:
        """Close the pipe and wait for the command."""
        self.stream.close()
        self.wait_for_child()

    def __enter__(self) -> Pipe:
        return self

    def __exit__(self, etype: Any, value: Any, traceback: Any) -> None:
        self.close()


def _popen(args: tuple[Any, ...], kw: dict[str, Any], piped: str) -> Any:
    """``subprocess.Popen(*args, **kw)`` with ``piped`` (``"stdout"`` or ``"stdin"``) a pipe."""
    import subprocess  # noqa: PLC0415 - loads with the first command, not with shardstream

    return subprocess.Popen(*args, **{**kw, piped: subprocess.PIPE})


def set_options(obj: Any, timeout: float | None = None, ignore_errors: bool | None = None,
                ignore_status: list[int] | None = None, handler: Any = None) -> bool:
    """Set the options of a :class:`Pipe`; False (and nothing changed) for any other stream."""
    if not isinstance(obj, Pipe):
        return False
    for name, value in (("timeout", timeout), ("ignore_errors", ignore_errors), ("ignore_status", ignore_status),
                        ("handler", handler)):
        if value is not None:
            setattr(obj, name, value)
    return True


def _open(url: str, mode: str) -> IO[bytes]:
    if mode[0] == "r":
        return open_url(url)
    if mode[0] == "w":
        return open_for_writing(url)
    raise ConfigError(f"{mode}: unknown mode (use 'rb' or 'wb')")


def gopen_file(url: str, mode: str = "rb", bufsize: int = 8192) -> IO[bytes]:
    """A local path or ``file:`` URL."""
    return _open(path_of(url) if url.startswith("file:") else url, mode)


def gopen_pipe(url: str, mode: str = "rb", bufsize: int = 8192) -> IO[bytes]:
    """``pipe:CMD``: the output of CMD (reading) or its input (writing)."""
    if not url.startswith("pipe:"):
        raise ConfigError(f"gopen_pipe needs a pipe: URL, not {url!r}")
    return _open(url, mode)


def gopen_curl(url: str, mode: str = "rb", bufsize: int = 8192) -> IO[bytes]:
    """HTTP(S): read with shardstream's HTTP client (retries, resume); write with ``curl -T -`` (PUT)."""
    if mode[0] == "w":
        return Pipe(["curl", "-f", "-s", "-X", "PUT", "-L", "-T", "-", url], mode="wb",  # type: ignore[return-value]
                    ignore_status=[141, 26])
    return _open(url, mode)


def gopen_htgs(url: str, mode: str = "rb", bufsize: int = 8192) -> IO[bytes]:
    """``htgs://bucket/path``: a public Google Cloud Storage object over HTTPS (read only)."""
    if mode[0] != "r":
        raise ConfigError(f"{url}: htgs: URLs cannot be written")
    return open_url(re.sub(r"(?i)^htgs://", "https://storage.googleapis.com/", url))


def gopen_hf(url: str, mode: str = "rb", bufsize: int = 8192) -> IO[bytes]:
    """``hf://`` Hugging Face Hub files (read through fsspec; extra ``hf``)."""
    return _open(url, mode)


def gopen_gsutil(url: str, mode: str = "rb", bufsize: int = 8192) -> IO[bytes]:
    """``gs://`` objects (through fsspec; extra ``gcs``)."""
    return _open(url, mode)


def gopen_ais(url: str, mode: str = "rb", bufsize: int = 8192) -> IO[bytes]:
    """``ais://`` AIStore objects through ``AIS_ENDPOINT`` (read only)."""
    if mode[0] != "r":
        raise ConfigError(f"{url}: ais: URLs cannot be written by shardstream")
    return open_url(url)


def gopen_error(url: str, *args: Any, **kw: Any) -> IO[bytes]:
    """The opener of unknown schemes: raises ValueError (a :class:`~shardstream.errors.ConfigError`)."""
    raise ConfigError(f"{url}: no gopen handler defined for this scheme; known: {', '.join(known_schemes())}")


def reader(url: str, **kw: Any) -> IO[bytes]:
    """``gopen(url, "rb")``."""
    return gopen(url, "rb", **kw)


class _Schemes(MutableMapping[str, Callable[..., IO[bytes]]]):
    """scheme -> webdataset-style opener ``(url, mode="rb", bufsize=8192)``, over shardstream's registry."""

    _BUILTIN: dict[str, Callable[..., IO[bytes]]] = {
        "__default__": gopen_error, "pipe": gopen_pipe, "http": gopen_curl, "https": gopen_curl,
        "ais": gopen_ais, "gs": gopen_gsutil, "htgs": gopen_htgs, "hf": gopen_hf, "file": gopen_file,
    }

    def __init__(self) -> None:
        self._added: dict[str, Callable[..., IO[bytes]]] = {}

    def __getitem__(self, scheme: str) -> Callable[..., IO[bytes]]:
        if scheme in self._added:
            return self._added[scheme]
        if scheme in self._BUILTIN:
            return self._BUILTIN[scheme]
        if scheme in known_schemes():
            get_opener(f"{scheme}:")  # exists
            return lambda url, mode="rb", bufsize=8192, **kw: _open(url, mode)
        raise KeyError(scheme)

    def __setitem__(self, scheme: str, opener: Callable[..., IO[bytes]]) -> None:
        self._added[scheme] = opener
        register_opener(scheme, lambda url: opener(url, "rb"), replace=True, description="added via gopen_schemes")

    def __delitem__(self, scheme: str) -> None:
        del self._added[scheme]
        unregister_opener(scheme)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._BUILTIN, *known_schemes(), *self._added]))

    def __len__(self) -> int:
        return len(list(iter(self)))


#: webdataset's scheme table, a live view of shardstream's opener registry
gopen_schemes = _Schemes()
