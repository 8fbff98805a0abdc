"""Decoder handlers: webdataset's ``(key, data) -> value | None`` callables that run before the codec table.

:func:`handle_extension` decodes fields by extension (dot-component matching, as webdataset), :class:`Continue`
goes on decoding under a new key, and :data:`gzfilter` unwraps ``.gz`` fields (it always runs first in a
:class:`~shardstream.codecs.Decoder`).

>>> handle_extension("seg.png", len)(".a.seg.png", b"abc"), handle_extension("png", len)(".txt", b"abc")
(3, None)
>>> c = gzfilter(".json.gz", __import__("gzip").compress(b"[1]"))
>>> c.key, c.data
('.json', b'[1]')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .basic import gzip_loads

__all__ = ["Continue", "ExtensionHandler", "gzfilter", "handle_extension"]


class Continue:
    """Returned by a handler to go on decoding ``data`` under a new ``key`` (webdataset's ``Continue``).

    >>> def unwrap_b64(key, data):
    ...     if key.endswith(".b64"):
    ...         return Continue(key[:-4], __import__("base64").b64decode(data))
    >>> from shardstream.codecs import Decoder
    >>> Decoder(unwrap_b64)({"cls.b64": b"Nw=="})
    {'cls.b64': 7}
    """

    __slots__ = ("key", "data")

    def __init__(self, key: str, data: bytes):
        self.key, self.data = key, data


class ExtensionHandler:
    """The handler made by :func:`handle_extension`: calls ``f(data)`` when the key's extension matches."""

    def __init__(self, extensions: str | Iterable[str], f: Callable[[bytes], Any]):
        if isinstance(extensions, str):
            extensions = extensions.split()
        self.extensions = tuple(e.lower() for e in extensions)
        self._targets = tuple(e.split(".") for e in self.extensions)
        self.f = f

    def matches(self, key: str) -> bool:
        """Whether ``key`` ends with one of the extensions, compared dot-component by component."""
        parts = key.lower().split(".")
        return any(len(t) <= len(parts) and parts[-len(t) :] == list(t) for t in self._targets)

    def resolve(self, key: str) -> Callable[[bytes], Any] | None:
        """``data -> value`` for this key, or ``None`` when the handler does not apply (used for caching)."""
        return self.f if self.matches(key) else None

    def __call__(self, key: str, data: bytes) -> Any:
        fn = self.resolve(key)
        return None if fn is None else fn(data)

    def __repr__(self) -> str:
        return f"handle_extension({' '.join(self.extensions)!r}, {self.f!r})"


def handle_extension(extensions: str | Iterable[str], f: Callable[[bytes], Any]) -> ExtensionHandler:
    """A handler that decodes with ``f(data)`` the fields whose extension ends with one of ``extensions``.

    ``extensions`` is a space-separated list; matching is case-insensitive and by dot-components, as in
    webdataset: ``"jpg"`` matches ``jpg`` and ``seg.jpg`` fields, ``"seg.jpg"`` only ``...seg.jpg`` fields,
    and a leading dot anchors at the start of the field name (``".png"`` matches the field ``png`` only).

    >>> from shardstream.codecs import Decoder
    >>> d = Decoder(handle_extension("seg.png", lambda b: "mask"), handle_extension("png", lambda b: "image"))
    >>> d({"png": b"", "seg.png": b""})
    {'png': 'image', 'seg.png': 'mask'}
    """
    return ExtensionHandler(extensions, f)


class _GzFilter(ExtensionHandler):
    """Gunzips ``*.gz`` fields and continues with the inner extension (webdataset's ``gzfilter``)."""

    def __init__(self) -> None:
        super().__init__("gz", gzip_loads)

    def resolve(self, key: str) -> Callable[[bytes], Any] | None:
        if not self.matches(key):
            return None
        inner = key[:-3]
        return lambda data: Continue(inner, gzip_loads(data))

    def __repr__(self) -> str:
        return "gzfilter"


#: The ``.gz`` handler; it always runs first in a :class:`Decoder`.
gzfilter = _GzFilter()
