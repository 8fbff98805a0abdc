"""Samples to tar members: the checks and the encoding a writer does before it writes anything (internal).

:class:`SampleEncoder` turns a sample dict into an :class:`Encoded` value: its key, its field names in member
order (sorted), the ``(member name, data)`` pairs ready for :meth:`~shardstream.tar.writer.TarStreamWriter.add_many`,
their sizes and the bytes they take in the archive. A bad sample raises :class:`~shardstream.errors.EncodeError`
here, so that nothing of it reaches the archive. :class:`~shardstream.writer.TarWriter` encodes with it, and
:class:`~shardstream.writer.ShardWriter` too (the size decides the shard before the sample is written).

>>> encoded = SampleEncoder().encode({"__key__": "k", "txt": "hi", "cls": 3})
>>> encoded.fields, encoded.members, encoded.nbytes
(('cls', 'txt'), [(b'k.cls', b'3'), (b'k.txt', b'hi')], 2048)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..codecs import encode_sample
from ..codecs.table import lookup
from ..errors import EncodeError, MissingDependencyError
from ..samples import RESERVED_FIELDS
from ..tar.header import BLOCKSIZE
from ..tar.writer import PAX_SIZE_LIMIT, member_size
from ._targets import _BYTES

__all__ = ["Encoded", "SampleEncoder"]

EncoderSpec = bool | Callable[[dict], Mapping] | Mapping[str, Callable[[Any], bytes]]


class Encoded(NamedTuple):
    """One sample ready to write: its key, field names and ``(member name, data)`` pairs in member order, the
    data sizes, and the bytes the members take in the tar."""

    key: str
    fields: tuple[str, ...]
    members: list[tuple[bytes, Any]]
    sizes: list[int]
    nbytes: int


def _field_error(key: str, field: Any, problem: str) -> EncodeError:
    return EncodeError(f"sample {key!r}: field {field!r} {problem}")


class SampleEncoder:
    """Check and encode samples as :class:`~shardstream.writer.TarWriter` documents it (``encoder``,
    ``keep_meta``, ``jpeg_quality`` have its meaning).

    >>> SampleEncoder(encoder=False).encode({"__key__": "a", "png": b"..."}).members
    [(b'a.png', b'...')]
    """

    def __init__(self, encoder: EncoderSpec = True, keep_meta: bool = False, jpeg_quality: int | None = None):
        self.encoder, self.keep_meta, self.jpeg_quality = encoder, keep_meta, jpeg_quality
        self._suffixes: dict[str, bytes] = {}  # checked field names -> b"." + UTF-8 name
        self._orders: dict[tuple[str, ...], tuple[str, ...]] = {}  # field names as given -> sorted (a few sets)
        #: names of a sample dict as given (``__key__`` too) -> ``(field, suffix)`` to write, () if no fast path
        self._plans: dict[tuple[Any, ...], tuple[tuple[str, bytes, Any], ...]] = {}
        self._plan_names: dict[tuple[tuple[str, bytes, Any], ...], tuple[str, ...]] = {}

    def encode(self, sample: Mapping[str, Any]) -> Encoded:
        """Validate and encode ``sample`` (raises :class:`~shardstream.errors.EncodeError` naming key and field)."""
        if sample.__class__ is dict:  # the fast path: a set of field names seen before, all bytes or str values
            plan = self._plans.get(tuple(sample))
            key = sample.get("__key__")
            if plan and key.__class__ is str and key and "\0" not in key:
                key_bytes = key.encode("utf-8", "surrogateescape")
                members, sizes, nbytes = [], [], 0
                for name, suffix, codec in plan:
                    data = sample[name]
                    kind = data.__class__
                    if kind is str:
                        data = data.encode("utf-8")
                    elif kind is not bytes:  # the table's encoder of this field (ints for .cls...), or the general path
                        if codec is None or isinstance(data, (bytes, bytearray, memoryview, str)):
                            break
                        try:
                            data = codec(data)
                        except Exception:  # the general path words the error
                            break
                        if data.__class__ is not bytes:
                            break
                    member = key_bytes + suffix
                    size = len(data)
                    if size < PAX_SIZE_LIMIT and len(member) <= 100:  # one ustar block (member_size, inlined)
                        nbytes += BLOCKSIZE + size + (-size % BLOCKSIZE)
                    else:
                        nbytes += member_size(member, size)
                    members.append((member, data))
                    sizes.append(size)
                else:
                    return Encoded(key, self._plan_names[plan], members, sizes, nbytes)
        return self._encode(sample)

    def _encode(self, sample: Mapping[str, Any]) -> Encoded:
        if sample.__class__ is not dict and not isinstance(sample, Mapping):
            raise EncodeError(f"a sample must be a dict of fields, got {type(sample).__name__}")
        key: Any = sample.get("__key__")
        if key.__class__ is not str or not key or "\0" in key:
            self._bad_key(sample, key)
        encoder = self.encoder
        fields: dict[str, Any]
        if encoder is True or encoder is False:  # fast path: bytes and str pass through, as encode_sample does
            fields = {}
            for name, value in sample.items():
                if name.__class__ is not str and not isinstance(name, str):
                    raise _field_error(key, name, "is not a str")
                if name[:1] == "_":
                    continue
                kind = value.__class__
                if encoder is True and name[-2:].lower() == "gz":  # the codecs gzip under .gz
                    fields[name] = self._encode_field(key, name, value)
                elif kind is bytes or (kind is not str and isinstance(value, _BYTES)):
                    fields[name] = value
                elif kind is str or isinstance(value, str):
                    fields[name] = value.encode("utf-8")
                elif encoder is True:  # one field through the table (encode_sample does each field alone)
                    fields[name] = self._encode_field(key, name, value)
                else:  # encoder=False and not bytes or str: the codecs word the error
                    fields = self._encode_fields(sample, key)
                    break
        else:
            fields = self._encode_fields(sample, key)
        if self.keep_meta:
            self._add_meta(sample, key, fields)
        given = tuple(fields)
        names = self._orders.get(given)
        if names is None:
            names = self._order(key, given)
        key_bytes = key.encode("utf-8", "surrogateescape")
        suffixes = self._suffixes
        members, sizes, nbytes = [], [], 0
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
            if size < PAX_SIZE_LIMIT and len(member) <= 100:  # one ustar block (what member_size says, inlined)
                nbytes += BLOCKSIZE + size + (-size % BLOCKSIZE)
            else:
                nbytes += member_size(member, size)
            members.append((member, data))
            sizes.append(size)
        if sample.__class__ is dict and len(self._plans) < 256:
            given = tuple(sample)
            if given not in self._plans:
                self._plans[given] = self._plan(sample, names)
                self._plan_names[self._plans[given]] = names
        return Encoded(key, names, members, sizes, nbytes)

    def _plan(self, sample: dict[str, Any], names: tuple[str, ...]) -> tuple[tuple[str, bytes, Any], ...]:
        """The plan of a set of field names: ``(field, suffix, table encoder or None)`` in member order, for
        fields that take bytes and str unchanged (str as UTF-8) or other values through the table's encoder of a
        plain data codec (``encoder=True``); () where there is no such plan (the general path each time)."""
        if self.keep_meta or not (self.encoder is True or self.encoder is False):
            return ()
        plan = []
        for name in names:
            suffix = self._suffixes.get(name)
            if suffix is None or (self.encoder is True and name[-2:].lower() == "gz"):
                return ()
            found = lookup(name) if self.encoder is True else None
            codec = found[1].encode if found is not None and found[1].kind == "data" else None
            if sample[name].__class__ not in (bytes, str) and codec is None:
                return ()
            plan.append((name, suffix, codec))
        return tuple(plan)

    @staticmethod
    def _bad_key(sample: Mapping[str, Any], key: Any) -> None:
        if key is None:
            raise EncodeError(
                f"sample without '__key__' (fields {sorted(map(str, sample))}); every sample needs a unique key, "
                "e.g. {'__key__': 'sample%06d' % index, ...}"
            )
        if not isinstance(key, str) or not key or "\0" in key:
            raise EncodeError(f"__key__ must be a non-empty str without NUL, got {key!r}")

    def _order(self, key: str, given: tuple[str, ...]) -> tuple[str, ...]:
        try:
            names = tuple(sorted(given))
        except TypeError:  # names of mixed types
            raise _field_error(key, next(n for n in given if not isinstance(n, str)), "is not a str") from None
        if len(self._orders) < 256:
            self._orders[given] = names
        return names

    def _add_meta(self, sample: Mapping[str, Any], key: str, fields: dict[str, Any]) -> None:
        for name, value in sample.items():
            if isinstance(name, str) and name[:1] == "_" and name not in RESERVED_FIELDS:
                if isinstance(value, str):
                    value = value.encode("utf-8")
                elif not isinstance(value, _BYTES):
                    raise _field_error(key, name, f"is metadata and must be str or bytes, not {type(value).__name__}")
                fields[name] = value

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

    def _encode_field(self, key: str, name: str, value: Any) -> bytes:
        """One value through the codecs' table (what :func:`encode_sample` does for each field)."""
        return self._encode_fields({"__key__": key, name: value}, key)[name]

    def _encode_fields(self, sample: Mapping[str, Any], key: str) -> dict[str, Any]:
        try:
            encoded = encode_sample(sample, encoder=self.encoder, jpeg_quality=self.jpeg_quality)  # type: ignore[arg-type]
        except (EncodeError, MissingDependencyError):  # they already name the sample and the field
            raise
        except Exception as e:  # a custom encoder failed: say which sample
            raise EncodeError(f"sample {key!r}: the encoder failed: {type(e).__name__}: {e}") from e
        return {name: value for name, value in encoded.items() if not (isinstance(name, str) and name[:1] == "_")}
