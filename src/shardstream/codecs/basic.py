"""Codec functions for the basic fields: text, integers, JSON, MessagePack, CBOR, pickle, gzip.

Every function here takes ``bytes`` and returns a value (``*_loads``) or takes a value and returns ``bytes``
(``*_dumps``). Which extension uses which function is decided in one place only, :mod:`.table`.
Encoders raise ``TypeError``/``ValueError`` for values they cannot encode; the caller turns that into an
:class:`~shardstream.errors.EncodeError` naming the sample and field.

>>> int_loads(int_dumps(3)), text_loads("é".encode())
(3, 'é')
>>> json_dumps({"a": [1, 2]})
b'{"a": [1, 2]}'
"""

from __future__ import annotations

import gzip
import json
import operator
import pickle
from typing import TYPE_CHECKING, Any

import msgpack

from .._lazy import lazy_module
from ..errors import MissingDependencyError
from .limits import bounded_gunzip

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")  # loads with the first array, not with shardstream

__all__ = [
    "cbor_dumps",
    "cbor_loads",
    "gzip_dumps",
    "gzip_loads",
    "int_dumps",
    "int_loads",
    "json_dumps",
    "json_loads",
    "msgpack_dumps",
    "msgpack_loads",
    "pickle_dumps",
    "pickle_loads",
    "text_dumps",
    "text_loads",
]

#: Pickle protocol used for writing; pinned so the bytes do not change with the Python version.
PICKLE_PROTOCOL = 4


#: UTF-8 bytes -> ``str``. The builtin itself: it runs for every caption, so no Python frame around it.
text_loads = bytes.decode


def text_dumps(value: Any) -> bytes:
    """``str`` -> UTF-8 bytes (anything else is a ``TypeError``: text fields hold text)."""
    if not isinstance(value, str):
        raise TypeError(f"a text field needs a str, not {type(value).__name__}")
    return value.encode("utf-8")


#: ASCII decimal bytes -> ``int`` (surrounding whitespace allowed). The builtin itself, for speed.
int_loads = int


def int_dumps(value: Any) -> bytes:
    """An integer (``int``, ``bool``, numpy or torch integer scalar) -> ASCII decimal, like webdataset.

    Floats are refused rather than written as ``"3.0"``, which no reader could parse back as a class.

    >>> int_dumps(7), int_dumps(np.int64(7))
    (b'7', b'7')
    """
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"an integer field needs an int, not {type(value).__name__} ({value!r:.40})") from None
    return str(number).encode("ascii")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_loads(data: bytes) -> Any:
    """JSON bytes -> value.

    >>> json_loads(b'{"a": 1}')
    {'a': 1}
    """
    return json.loads(data)


def json_dumps(value: Any) -> bytes:
    """Value -> JSON bytes, byte-identical to webdataset's ``json.dumps(x)`` for plain Python values.

    numpy scalars and arrays are written as numbers and lists.

    >>> json_dumps({"label": np.int64(3), "box": np.array([1, 2])})
    b'{"label": 3, "box": [1, 2]}'
    """
    return json.dumps(value, default=_json_default).encode("utf-8")


def msgpack_loads(data: bytes) -> Any:
    """MessagePack bytes -> value (strings as ``str``; non-string map keys allowed).

    >>> msgpack_loads(msgpack_dumps({"a": [1, 2.5, "x"]}))
    {'a': [1, 2.5, 'x']}
    """
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def msgpack_dumps(value: Any) -> bytes:
    """Value -> MessagePack bytes."""
    return msgpack.packb(value, use_bin_type=True)


def _cbor2(feature: str):
    try:
        import cbor2  # noqa: PLC0415 - optional: shardstream[cbor]
    except ImportError as e:
        raise MissingDependencyError(feature, "cbor", "cbor2") from e
    return cbor2


def cbor_loads(data: bytes) -> Any:
    """CBOR bytes -> value (needs the ``cbor`` extra: ``pip install 'shardstream[cbor]'``)."""
    return _cbor2("decoding .cbor").loads(data)


def cbor_dumps(value: Any) -> bytes:
    """Value -> CBOR bytes (needs the ``cbor`` extra)."""
    return _cbor2("encoding .cbor").dumps(value)


def pickle_loads(data: bytes) -> Any:
    """Unpickle. UNSAFE on data you did not write: the table marks it so, and the decoder asks for an opt-in."""
    return pickle.loads(data)


def pickle_dumps(value: Any) -> bytes:
    """Pickle with a pinned protocol (so the bytes do not depend on the Python version).

    >>> pickle_loads(pickle_dumps({"a": (1, 2)}))
    {'a': (1, 2)}
    """
    return pickle.dumps(value, protocol=PICKLE_PROTOCOL)


def gzip_loads(data: bytes, max_size: int | None = None) -> bytes:
    """Gunzip (concatenated members too, as ``gzip``), never inflating past ``max_size`` bytes: a bigger result
    raises :class:`~shardstream.errors.DecodeLimitError` (a ``ValueError``) as soon as it is seen, so a gzip bomb
    is never inflated in full. Default: ``SHARDSTREAM_MAX_DECODED_BYTES`` (see :mod:`.limits`).

    >>> gzip_loads(gzip_dumps(b"abc"), max_size=3)
    b'abc'
    >>> gzip_loads(gzip_dumps(b"abcd"), max_size=3)
    Traceback (most recent call last):
    ...
    shardstream.errors.DecodeLimitError: gunzipped data would be 4 bytes, which exceeds the limit of 3 ...
    """
    return bounded_gunzip(data, max_size)


def gzip_dumps(data: bytes) -> bytes:
    """Gzip deterministically (``mtime=0``, no file name), so the same input always gives the same bytes.

    >>> gzip_dumps(b"abc") == gzip_dumps(b"abc") and gzip_loads(gzip_dumps(b"abc"))
    b'abc'
    """
    return gzip.compress(bytes(data), mtime=0)
