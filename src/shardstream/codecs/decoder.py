"""Decoding samples: :class:`Decoder`, a webdataset-compatible handler chain in front of the codec table.

For each field, the chain is: the ``.gz`` unwrapper, then the handlers you gave (image spec strings become
:func:`imagehandler`; video and audio: :mod:`.media`), in order, then the table (:mod:`.table`). A handler is a callable
``(key, data) -> value | None`` called with ``"." + field`` (``".jpg"``, ``".seg.jpg"``), as webdataset
does; the first non-``None`` result wins. A handler may return :class:`Continue` to go on with a new key and
data (``.gz`` unwrapping does this). The table's answer is final (so a JSON ``null`` decodes to ``None``);
fields no step decodes stay ``bytes``.

The chain is resolved once per field name and cached, so with the built-in handlers decoding a field is one
dict lookup and one call.

>>> d = Decoder()
>>> d({"__key__": "k", "cls": b"3", "txt": b"hi", "x.json.gz": __import__("gzip").compress(b"[1]")})
{'__key__': 'k', 'cls': 3, 'txt': 'hi', 'x.json.gz': [1]}
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, overload

from ..config import secure_mode, secure_refusal
from ..errors import ConfigError, DecodeError, UnsafeDecodeError
from .decode_handlers import Continue, ExtensionHandler, gzfilter, handle_extension
from .failures import decode_failure, failure_cause
from .images import IMAGE_SPECS, ImageHandler
from .table import lookup

__all__ = [
    "Continue",
    "Decoder",
    "ExtensionHandler",
    "decode_field",
    "gzfilter",
    "handle_extension",
]

_UNSAFE_HINT = (
    "if you trust this data, opt in with Decoder(..., allow_unsafe=True) or .decode(..., allow_unsafe=True) "
    "(decode_field(..., allow_unsafe=True) for one field)"
)


_RESOLVABLE = (ExtensionHandler, ImageHandler)


def _identity(data: bytes) -> bytes:
    return data


# Decoder._fields values for metadata fields (``__key__``...: a marker, tested with ``is``, never called) and
# fields excluded by ``only=``
def _META(data: bytes) -> bytes:
    return data  # pragma: no cover - never called


def _keep(data: bytes) -> bytes:
    return data


_BYTES = {bytes}
_MAX_CACHED_FIELDS = 4096  # field names are extensions, so few; bound the caches anyway


def _meta(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return value


def _context(batch: dict, i: int) -> dict:
    """``__key__``/``__url__`` of row ``i`` of a columnar batch, where the batch has them."""
    context = {}
    for name in ("__key__", "__url__"):
        try:
            context[name] = batch[name][i]
        except (KeyError, IndexError, TypeError):
            pass
    return context


def _refuse(ext: str, codec_name: str, data: bytes) -> Any:
    raise UnsafeDecodeError(
        f"refusing to decode .{ext} data: it is a Python {codec_name}, and unpickling data from a shard can run "
        f"arbitrary code; {_UNSAFE_HINT}"
    )


class Decoder:
    """Decode the fields of samples by extension; callable on a sample ``dict``, returns a new ``dict``.

    ``specs_or_handlers``: image spec strings (``"rgb"``, ``"torchrgb8"``, ``"pil"``... see
    :data:`~shardstream.codecs.IMAGE_SPECS`; images stay ``bytes`` without one, as in webdataset), handler
    callables ``(key, data) -> value | None``, or lists of them. ``only``: field names to decode (a list or a
    space-separated string); others are left as they are. ``partial``: leave values that are not ``bytes``
    as they are instead of raising. ``allow_unsafe``: allow unpickling (``.pyd``/``.pickle``/``.pkl``) and full
    ``torch.load`` of ``.pth``; without it those fields raise :class:`~shardstream.errors.UnsafeDecodeError`
    (refused in secure mode). webdataset's ``Decoder(handlers, pre=, post=)``: ``handlers=`` is the same as the
    positional handlers; ``pre`` replaces the handlers that run first (``[gzfilter]``), ``post`` the decoding by the
    codec table that runs last (``post=[]``: fields no handler decodes stay bytes).

    ``__key__``, ``__url__`` and other ``__*`` fields pass through (``bytes`` become ``str``, as in webdataset).
    A failure raises :class:`~shardstream.errors.DecodeError` naming the shard url, sample key and field, chained
    from the original exception.

    >>> import numpy as np
    >>> from shardstream.codecs import encode_sample
    >>> raw = encode_sample({"__key__": "a", "png": np.zeros((2, 2, 3), np.uint8), "cls": 1})
    >>> out = Decoder("rgb8")({"__key__": "a", **raw})
    >>> out["png"].shape, out["cls"]
    ((2, 2, 3), 1)
    >>> Decoder(only="cls")({"cls": b"1", "txt": b"x"})
    {'cls': 1, 'txt': b'x'}
    """

    def __init__(
        self,
        *specs_or_handlers: str | Callable[[str, bytes], Any] | list,
        pre: Iterable[Callable[[str, bytes], Any]] | None = None,
        post: Iterable[Callable[[str, bytes], Any]] | None = None,
        only: str | Iterable[str] | None = None,
        partial: bool = False,
        allow_unsafe: bool = False,
        handlers: Iterable[Any] | None = None,
    ):
        if allow_unsafe and secure_mode():
            raise secure_refusal("unpickle", "Decoder(allow_unsafe=True): unpickling runs code from the data",
                                 "decode without allow_unsafe, or unset secure mode")
        chain: list[Callable[[str, bytes], Any]] = [gzfilter] if pre is None else list(pre)
        for item in _flatten((*specs_or_handlers, *(handlers or ()))):
            if isinstance(item, str):
                if item.lower() not in IMAGE_SPECS:
                    raise ConfigError(f"unknown image spec {item!r} for Decoder; valid specs: {', '.join(IMAGE_SPECS)}")
                item = ImageHandler(item.lower())
            elif not callable(item):
                raise ConfigError(f"Decoder takes image spec strings and callables (key, data) -> value, not {item!r}")
            chain.append(item)
        chain += list(post or ())
        self.handlers = tuple(chain)
        self.table = post is None  # webdataset's post handlers replace the table's decoding
        if isinstance(only, str):
            only = only.split()
        self.only = None if only is None else frozenset(f[1:] if f.startswith(".") else f for f in only)
        self.partial = bool(partial)
        self.allow_unsafe = bool(allow_unsafe)
        self._fields: dict[str, Callable[[bytes], Any]] = {}
        self._plans: dict[tuple[str, int], Callable[[bytes], Any]] = {}

    # -- resolution (cached per field name) --------------------------------------------------------

    def _plan(self, key: str, start: int) -> Callable[[bytes], Any]:
        plan = self._plans.get((key, start))
        if plan is None:
            plan = self._plans[(key, start)] = self._build(key, start)
        return plan

    def _build(self, key: str, start: int) -> Callable[[bytes], Any]:
        steps = []
        for index in range(start, len(self.handlers)):
            handler = self.handlers[index]
            fn = handler.resolve(key) if isinstance(handler, _RESOLVABLE) else functools.partial(handler, key)
            if fn is not None:
                steps.append((index, fn))
        final = self._table_step(key) if self.table else None
        if not steps:
            return _identity if final is None else final

        def run(data: bytes) -> Any:
            for index, fn in steps:
                result = fn(data)
                if result is None:
                    continue
                if isinstance(result, Continue):
                    return self._plan(result.key, index + 1)(result.data)
                return result
            return data if final is None else final(data)

        return run

    def _table_step(self, key: str) -> Callable[[bytes], Any] | None:
        found = lookup(key[1:] if key.startswith(".") else key)
        if found is None:
            return None
        ext, codec = found
        if codec.kind == "image" or codec.decode is None:
            return None
        if codec.kind == "wrapper":
            inner, unwrap, end = key[: -len(ext) - 1], codec.decode, len(self.handlers)
            return lambda data: self._plan(inner, end)(unwrap(data))
        if not self.allow_unsafe:
            return codec.decode if codec.safe else functools.partial(_refuse, ext, codec.name)
        return codec.unsafe_decode or codec.decode

    def _resolve(self, field: str) -> Callable[[bytes], Any]:
        if len(self._fields) > _MAX_CACHED_FIELDS:
            self._fields.clear()
            self._plans.clear()
        fn: Callable[[bytes], Any]
        if field[:2] == "__":
            fn = _META
        elif self.only is not None and field not in self.only:
            fn = _keep
        else:
            fn = self._plan("." + field, 0)
        self._fields[field] = fn
        return fn

    # -- decoding ----------------------------------------------------------------------------------

    @overload
    def __call__(self, sample: dict) -> dict: ...

    @overload
    def __call__(self, sample: Iterable[dict]) -> Iterator[dict]: ...

    def __call__(self, sample: dict | Iterable[dict]) -> dict | Iterator[dict]:
        if not isinstance(sample, dict):
            if hasattr(sample, "__iter__") and not isinstance(sample, (str, bytes)):
                return map(self, sample)  # webdataset's `Decoder(...)(dataset)`
            raise TypeError(f"Decoder expects a sample dict (or an iterable of them), not {type(sample).__name__}")
        get = self._fields.get
        result = {}
        for k, v in sample.items():
            fn = get(k)
            if fn is None:
                fn = self._resolve(k)
            if fn is _META:
                result[k] = v if v.__class__ is not bytes else _meta(v)
            elif v.__class__ is bytes:
                try:
                    result[k] = fn(v)
                except Exception as e:
                    raise decode_failure(e, sample.get("__url__"), sample.get("__key__"), k) from failure_cause(e)
            else:
                result[k] = self._decode_other(fn, v, sample, k)
        return result

    def _decode_other(self, fn: Callable[[bytes], Any], v: Any, sample: Any, k: str) -> Any:
        if fn is _keep or (self.partial and not isinstance(v, (bytearray, memoryview))):
            return v
        url, key = sample.get("__url__"), sample.get("__key__")
        if not isinstance(v, (bytearray, memoryview)):
            raise DecodeError(
                f"value is a {type(v).__name__}, not bytes (already decoded?); pass partial=True to leave such "
                "values as they are",
                url=url,
                key=key,
                field=k,
            )
        try:
            return fn(bytes(v))
        except Exception as e:
            raise decode_failure(e, url, key, k) from failure_cause(e)

    def decode_columns(self, batch: dict) -> dict:
        """Decode a batch in columns, ``{field: [bytes, ...]}`` -> ``{field: [value, ...]}``.

        The same result as decoding each sample, field by field, but several times faster for small fields
        (``txt``, ``cls``) as the per-sample work disappears. Errors name the key of the failing row when the
        batch has a ``__key__`` column.

        >>> Decoder().decode_columns({"__key__": ["a", "b"], "cls": [b"1", b"2"], "txt": [b"x", b"y"]})
        {'__key__': ['a', 'b'], 'cls': [1, 2], 'txt': ['x', 'y']}
        """
        get = self._fields.get
        result = {}
        for k, column in batch.items():
            fn = get(k)
            if fn is None:
                fn = self._resolve(k)
            if fn is _keep or fn is _META:
                result[k] = column
                continue
            try:
                if set(map(type, column)) <= _BYTES:
                    result[k] = list(map(fn, column))
                    continue
            except Exception:
                pass  # find the failing row below, to report it with its key
            result[k] = [self({**_context(batch, i), k: v})[k] for i, v in enumerate(column)]
        return result

    def decode(self, sample: dict) -> dict:
        """Decode a whole sample (same as calling the decoder; webdataset's name)."""
        return self(sample)

    def decode1(self, field: str, data: bytes) -> Any:
        """Decode one field's data (webdataset's name); errors name the field only.

        >>> Decoder().decode1("json", b"[1, 2]")
        [1, 2]
        """
        fn = self._plan("." + field, 0)
        try:
            return fn(bytes(data))
        except Exception as e:
            raise decode_failure(e, None, None, field) from failure_cause(e)

    def table_codec(self, field: str) -> str | None:
        """How this decoder decodes ``field``, when that is the codec table's doing alone: the
        :class:`~shardstream.codecs.Codec` name (``"text"``, ``"int"``, ``"json"``...), ``""`` when the field stays
        bytes, ``None`` otherwise (a handler or image spec in front, a wrapper such as ``.gz``, a ``__`` field).
        Native fast paths decode only what this names, and are tested equal to the table's codec.

        >>> d = Decoder()
        >>> d.table_codec("txt"), d.table_codec("cls"), d.table_codec("jpg"), d.table_codec("x.json.gz")
        ('text', 'int', '', None)
        """
        fn = self._fields.get(field) or self._resolve(field)
        if fn is _keep or fn is _identity:
            return ""
        found = lookup(field)
        if found is not None and found[1].kind == "data" and fn is found[1].decode:
            return found[1].name
        return None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_fields"], state["_plans"] = {}, {}
        return state

    def __repr__(self) -> str:
        args = [repr(h) for h in self.handlers[1:]]
        if self.only is not None:
            args.append(f"only={sorted(self.only)!r}")
        if self.partial:
            args.append("partial=True")
        if self.allow_unsafe:
            args.append("allow_unsafe=True")
        return f"Decoder({', '.join(args)})"


def _flatten(items: Iterable[Any]) -> Iterable[Any]:
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flatten(item)
        else:
            yield item


@functools.lru_cache(maxsize=64)
def _decoder_for(imagespec: str | None, allow_unsafe: bool) -> Decoder:
    return Decoder(*([imagespec] if imagespec else []), allow_unsafe=allow_unsafe)


def as_decoder(decode: Any) -> Callable[[dict], Any] | None:
    """What a ``decode=`` argument means: None/False no decoding, True the default :class:`Decoder`, an image
    spec or a list of specs and handlers a :class:`Decoder` of them, a callable itself.

    >>> as_decoder(None) is None, type(as_decoder("rgb")).__name__, as_decoder(len) is len
    (True, 'Decoder', True)
    """
    if decode is None or decode is False:
        return None
    if decode is True:
        return Decoder()
    if isinstance(decode, str):
        return Decoder(decode)
    if isinstance(decode, (list, tuple)):
        return Decoder(*decode)
    if callable(decode):
        return decode
    raise ConfigError(f"decode must be None, True, an image spec, a list of specs, or a callable, not {decode!r}")


def decode_field(extension: str, data: bytes, *, imagespec: str | None = None, allow_unsafe: bool = False) -> Any:
    """Decode one field's bytes by its extension, exactly as ``Decoder(imagespec)`` would.

    Images are decoded only when ``imagespec`` is given (like ``Decoder()`` without a spec, which leaves them
    as bytes); ``.gz`` is unwrapped; unknown extensions give the bytes back.

    >>> decode_field("cls", b"5"), decode_field("txt.gz", __import__("gzip").compress(b"hi"))
    (5, 'hi')
    >>> decode_field("pyd", b"")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    shardstream.errors.UnsafeDecodeError: refusing to decode .pyd data: ... allow_unsafe=True) ... (field 'pyd')
    """
    return _decoder_for(imagespec, bool(allow_unsafe)).decode1(extension, data)
