"""The opener registry: URL scheme -> opener, resolved lazily.

An *opener* is a function ``url -> binary stream``. Openers are registered by scheme, either as the function
itself or as a ``"module:function"`` string that is imported on first use, with the optional extra that
provides the module, so that a missing dependency says how to install it (``pip install 'shardstream[s3]'``).

Built in (all local): plain paths, ``file:`` URLs, ``-`` (stdin) and ``pipe:CMD`` (runs ``CMD`` in a shell and
reads its standard output). Remote schemes register here later, without changing any caller.

>>> split_scheme("pipe:cat a.tar"), split_scheme("/data/a.tar"), split_scheme("C:/data/a.tar")
(('pipe', 'cat a.tar'), ('', '/data/a.tar'), ('', 'C:/data/a.tar'))
>>> "pipe" in known_schemes() and "file" in known_schemes()
True
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
from collections.abc import Callable
from typing import IO

from ..errors import ConfigError, MissingDependencyError, OpenError
from .rewrite import rewrite_url
from .trust import check_url
from .urls import local_path, split_scheme

__all__ = [
    "finish_stream",
    "get_opener",
    "known_schemes",
    "open_url",
    "register_opener",
    "split_scheme",
    "unregister_opener",
]

Opener = Callable[[str], IO[bytes]]
OpenerSpec = str | Opener


@dataclasses.dataclass(frozen=True)
class _Entry:
    target: OpenerSpec
    extra: str | None
    description: str


_OPENERS: dict[str, _Entry] = {}


def register_opener(
    scheme: str, opener: OpenerSpec, *, extra: str | None = None, description: str = "", replace: bool = False
) -> None:
    """Register ``opener`` (a function or a lazy ``"module:function"`` string) for URLs ``scheme:...``.

    ``extra`` names the optional dependency group that provides the module (used in the install hint when the
    import fails). Registering a scheme twice is an error unless ``replace=True``.

    >>> import io
    >>> register_opener("demo", lambda url: io.BytesIO(url.encode()), description="example")
    >>> open_url("demo:hello").read()
    b'demo:hello'
    >>> unregister_opener("demo")
    """
    scheme = scheme.lower()
    if not re.fullmatch(r"[a-z][a-z0-9+.\-]*", scheme) or len(scheme) < 2:
        raise ConfigError(f"invalid URL scheme {scheme!r}: use two or more letters, digits, '+', '-' or '.'")
    if scheme in _OPENERS and not replace:
        raise ConfigError(f"an opener for {scheme!r} is already registered; pass replace=True to replace it")
    if isinstance(opener, str) and ":" not in opener:
        raise ConfigError(f"lazy opener {opener!r} must look like 'package.module:function'")
    _OPENERS[scheme] = _Entry(opener, extra, description)


def unregister_opener(scheme: str) -> None:
    """Remove the opener of ``scheme`` (no error when there is none)."""
    _OPENERS.pop(scheme.lower(), None)


def known_schemes() -> list[str]:
    """The registered schemes, sorted (plain paths need no scheme and are always supported)."""
    return sorted(_OPENERS)


def _resolve(scheme: str, entry: _Entry) -> Opener:
    if not isinstance(entry.target, str):
        return entry.target
    module_name, _, attr = entry.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise MissingDependencyError(f"reading {scheme}: URLs", entry.extra or scheme, module_name) from e
    return getattr(module, attr)


def _unknown(url: str, scheme: str) -> OpenError:
    supported = ", ".join(f"'{s}:'" for s in known_schemes())
    return OpenError(
        f"no opener for the URL scheme {scheme!r}; supported: local paths, '-' (stdin), {supported}", url=url
    )


def get_opener(url: str) -> Opener:
    """The opener function for ``url`` (imported on first use); raises OpenError for an unknown scheme.

    >>> get_opener("shard-000000.tar").__name__
    'open_path'
    """
    if url == "-":
        return _resolve("-", _STDIN)
    scheme, _ = split_scheme(url)
    entry = _OPENERS.get(scheme)
    if entry is not None:
        return _resolve(scheme, entry)
    if local_path(url) is None:  # a path, or a relative path that merely looks like a URL ("data:2024/x.tar")
        raise _unknown(url, scheme)
    return _resolve("file", _OPENERS["file"])


def open_url(url: str | os.PathLike[str]) -> IO[bytes]:
    """Open a shard for reading as a binary stream, whatever its scheme.

    >>> import pathlib
    >>> _ = pathlib.Path("x.bin").write_bytes(b"abc")
    >>> with open_url("x.bin") as f: f.read()
    b'abc'
    >>> with open_url("file:x.bin") as f: f.read()
    b'abc'
    """
    url = os.fspath(url)
    if url != "-":

        url = rewrite_url(url)
        check_url(url)
    return get_opener(url)(url)


def finish_stream(stream: IO[bytes]) -> None:
    """Tell a stream the reader is done with it *normally*: a ``pipe:`` stream then drains the command's output
    and raises :class:`~shardstream.errors.OpenError` if it exited with a non-zero status. Other streams: no-op.
    """
    finish = getattr(stream, "finish", None)
    if finish is not None:
        finish()


# the built-in local openers: imported lazily like any other
register_opener("file", "shardstream.io.local:open_path", description="local files: paths and file: URLs")
_STDIN = _Entry("shardstream.io.local:open_stdin", None, "'-': standard input")
register_opener("pipe", "shardstream.io.pipe:open_pipe", description="pipe:CMD runs CMD in a shell, reads its stdout")
# remote schemes: the modules import only the standard library and fsspec; each library behind an object store
# scheme is imported when a URL needs it, and a missing one raises MissingDependencyError naming the extra
register_opener("http", "shardstream.io.web:open_http", description="HTTP with retries and exact resume")
register_opener("https", "shardstream.io.web:open_http", description="HTTPS with retries and exact resume")
register_opener("ais", "shardstream.io.aistore:open_ais", description="AIStore objects through AIS_ENDPOINT")
for _scheme, _extra in (("s3", "s3"), ("s3a", "s3"), ("gs", "gcs"), ("gcs", "gcs"), ("az", "azure"),
                        ("abfs", "azure"), ("abfss", "azure"), ("hf", "hf")):
    register_opener(_scheme, "shardstream.io.objectstore:open_object", extra=_extra,
                    description=f"object store via fsspec (pip install 'shardstream[{_extra}]')")
del _scheme, _extra
