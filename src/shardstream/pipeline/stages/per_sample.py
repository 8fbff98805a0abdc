"""Per-sample stages: map, select, decode, to_tuple, map_tuple, map_dict (webdataset's names and meanings).

Every stage that runs user code takes ``handler=`` (default: raise). A failing sample is passed to the
handler with its shard URL, key and field attached (see :mod:`~shardstream.pipeline.error_handlers`).

>>> samples = [{"__key__": "a", "jpg": 1, "cls": 0}, {"__key__": "b", "png": 2, "cls": 1}]
>>> list(to_tuple("jpg;png", "cls")(samples))
[(1, 0), (2, 1)]
>>> list(select(lambda s: s["cls"] > 0)(samples)) == samples[1:]
True
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...codecs import Decoder
from ...errors import MissingFieldError, SampleFormatError
from ..core import stage
from ..error_handlers import annotate, reraise_exception

__all__ = [
    "decode",
    "getfirst",
    "map",
    "map_dict",
    "map_tuple",
    "select",
    "to_tuple",
]

Handler = Callable[[BaseException], bool]
Sample = Any
_MISSING = object()


def _alternatives(fields: str | Sequence[str]) -> list[str]:
    return fields.split(";") if isinstance(fields, str) else list(fields)


def getfirst(sample: dict[str, Any], fields: str | Sequence[str], default: Any = None,
             missing_is_error: bool = True) -> Any:
    """The value of the first of ``fields`` (``"jpg;png"`` or a list) present in ``sample``.

    A missing field raises :class:`~shardstream.errors.MissingFieldError` (a
    :class:`~shardstream.errors.SampleFormatError`) naming the sample, the wanted fields, the fields it has and
    the one probably meant (or returns ``default`` when ``missing_is_error`` is False).

    >>> getfirst({"png": 1}, "jpg;png")
    1
    >>> getfirst({"__key__": "k", "jpg": 1, "cls": 2}, "jgp")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    shardstream.errors.MissingFieldError: sample has no field 'jgp' (did you mean 'jpg'?); its fields: 'jpg', 'cls' (...sample 'k')...
    """
    wanted = _alternatives(fields)
    for name in wanted:
        if name in sample:
            return sample[name]
    if not missing_is_error:
        return default
    raise missing_field(sample, wanted)


def missing_field(sample: dict[str, Any], wanted: Sequence[str]) -> MissingFieldError:
    """The error for a sample without any of the fields ``wanted``: the fields it has, and the one probably meant
    (a near spelling, another case, or ``file.jpg`` for ``jpg``), or the key rule to try when the member names
    have more dots than the key rule expects.

    >>> print(missing_field({"__key__": "k", "file.jpg": 1, "label.txt": 2}, ["jpg"]))  # doctest: +ELLIPSIS
    sample has no field 'jpg' (did you mean 'file.jpg'?); its fields: 'file.jpg', 'label.txt' (...
    >>> print(missing_field({"__key__": "song 2", "0.mp3": 1, "0.json": 2}, ["mp3"]))  # doctest: +ELLIPSIS
    sample has no field 'mp3'; its fields: '0.mp3', '0.json' (the member names have more dots than the key rule ...
    """
    have = [k for k in sample if not (isinstance(k, str) and k.startswith("__"))]
    names = [k for k in have if isinstance(k, str)]
    listed = ", ".join(repr(k) for k in have) or "none"
    problem = f"sample has no field {' or '.join(repr(w) for w in wanted)}"
    # one basename with dots (``song 2.0.mp3``: key 'song 2', fields '0.mp3', '0.json'): the key rule cut too early
    dotted_key = (bool(names) and len(names) == len(have) and all("." in k for k in names)
                  and len({k.rsplit(".", 1)[0] for k in names}) == 1
                  and any(k.endswith("." + w) for k in names for w in wanted))
    suggestion = None if dotted_key else _closest(wanted, names)
    if suggestion is not None:
        problem += f" (did you mean {suggestion!r}?)"
    problem += f"; its fields: {listed}"
    if dotted_key:
        problem += " (the member names have more dots than the key rule expects: try keys='last-dot')"
    return MissingFieldError(problem, wanted=tuple(wanted), fields=tuple(have), suggestion=suggestion,
                             url=sample.get("__url__"), key=sample.get("__key__"))


def _closest(wanted: Sequence[str], names: list[str]) -> str | None:
    """The field of ``names`` probably meant by one of ``wanted``: ``KEY.jpg`` for ``jpg``, ``jpg`` for ``JPG``,
    else the closest spelling (:func:`difflib.get_close_matches`), or None."""
    for w in wanted:
        for k in names:
            if k.endswith("." + w) or k.lower() == w.lower():
                return k
    for w in wanted:
        close = difflib.get_close_matches(w, names, n=1, cutoff=0.6)
        if close:
            return close[0]
    return None


def _map(source: Iterable[Sample], f: Callable[[Sample], Any], handler: Handler = reraise_exception) -> Iterator[Any]:
    """Apply ``f`` to each sample. A ``None`` result drops the sample; a dict result keeps the ``__key__``.

    >>> list(map(lambda x: x + 1)([1, 2]))
    [2, 3]
    """
    for sample in source:
        try:
            result = f(sample)
        except Exception as exn:
            annotate(exn, sample)
            if handler(exn):
                continue
            break
        if result is None:
            continue
        if isinstance(sample, dict) and isinstance(result, dict) and "__key__" in sample:
            result.setdefault("__key__", sample["__key__"])
        yield result


map = stage(_map, state="pass", keeps_count=True)


def _decode(
    source: Iterable[Sample],
    *specs: Any,
    only: Any = None,
    partial: bool = False,
    handler: Handler = reraise_exception,
    allow_unsafe: bool = False,
    pre: Sequence[Any] | None = None,
    post: Sequence[Any] | None = None,
) -> Iterator[Sample]:
    """Decode the fields of each sample by extension with :class:`shardstream.codecs.Decoder`.

    ``specs`` are image specs (``"rgb"``, ``"pil"``, ``"torchrgb"``, ``"l"``...) and handlers
    (``handle_extension(...)``, ``key, value -> decoded or None``); ``pre``/``post`` are handlers tried before
    / after them. ``only`` limits decoding to some extensions, ``partial`` leaves unknown ones as bytes, and
    ``allow_unsafe`` permits pickle/torch.load fields.

    >>> out = next(decode()([{"__key__": "k", "txt": b"hi", "cls": b"3"}]))
    >>> out["txt"], out["cls"]
    ('hi', 3)
    """
    decoder = Decoder(*(pre or ()), *specs, *(post or ()), only=only, partial=partial, allow_unsafe=allow_unsafe)
    yield from _map(source, decoder, handler=handler)


decode = stage(_decode, state="pass", keeps_count=True)


def _select(source: Iterable[Sample], predicate: Callable[[Sample], bool], handler: Handler = reraise_exception
            ) -> Iterator[Sample]:
    """Keep the samples for which ``predicate(sample)`` is true.

    >>> list(select(lambda x: x % 2)(range(5)))
    [1, 3]
    """
    for sample in source:
        try:
            keep = predicate(sample)
        except Exception as exn:
            annotate(exn, sample)
            if handler(exn):
                continue
            break
        if keep:
            yield sample


select = stage(_select, state="pass")


def _to_tuple(source: Iterable[Sample], *fields: str, handler: Handler = reraise_exception,
              missing_is_error: bool = True, none_is_error: bool | None = None) -> Iterator[tuple[Any, ...]]:
    """Turn each sample into a tuple of fields; ``"jpg;png"`` takes the first that is present.

    ``to_tuple("jpg json")`` (one string with spaces) is ``to_tuple("jpg", "json")``. A missing field raises
    (naming the sample, the field and the fields present) unless ``handler`` skips it or ``missing_is_error``
    is False (then it is None).

    >>> list(to_tuple("__key__", "txt")([{"__key__": "k", "txt": "hi"}]))
    [('k', 'hi')]
    """
    if len(fields) == 1 and " " in fields[0]:
        fields = tuple(fields[0].split())
    none_is_error = missing_is_error if none_is_error is None else none_is_error
    wanted = [(field, _alternatives(field)) for field in fields]
    for sample in source:
        values = []
        for field, names in wanted:
            for name in names:
                if name in sample:
                    value = sample[name]
                    break
            else:
                value = _MISSING
            if value is _MISSING or (value is None and none_is_error):
                try:
                    if value is _MISSING:
                        value = getfirst(sample, field, missing_is_error=missing_is_error)
                    if value is None and none_is_error:
                        raise SampleFormatError(f"field {field!r} is None", url=sample.get("__url__"),
                                                key=sample.get("__key__"))
                except Exception as exn:
                    annotate(exn, sample, field=field)
                    if handler(exn):
                        break
                    return
            values.append(value)
        else:
            yield tuple(values)


to_tuple = stage(_to_tuple, state="pass", keeps_count=True)


def _map_tuple(source: Iterable[Sequence[Any]], *fs: Callable[[Any], Any] | None,
               handler: Handler = reraise_exception) -> Iterator[tuple[Any, ...]]:
    """Apply ``fs[i]`` to position ``i`` of each tuple (``None``: leave it).

    >>> list(map_tuple(str, None)([(1, 2)]))
    [('1', 2)]
    """
    for sample in source:
        items = list(sample)
        try:
            for i, f in enumerate(fs[: len(items)]):
                if f is not None:
                    items[i] = f(items[i])
        except Exception as exn:
            if handler(exn):
                continue
            break
        yield tuple(items)


map_tuple = stage(_map_tuple, state="pass", keeps_count=True)


def _map_dict(source: Iterable[dict[str, Any]], handler: Handler = reraise_exception,
              **fs: Callable[[Any], Any]) -> Iterator[dict[str, Any]]:
    """Apply ``fs[field]`` to that field of each sample; a sample without one of the fields is an error
    (a ``KeyError``, given to ``handler``), as in webdataset.

    >>> list(map_dict(cls=lambda c: c * 10)([{"cls": 1, "txt": "a"}]))
    [{'cls': 10, 'txt': 'a'}]
    """
    for sample in source:
        result = dict(sample)
        field = None
        try:
            for field, f in fs.items():
                result[field] = f(result[field])
        except Exception as exn:
            annotate(exn, sample, field=field)
            if handler(exn):
                continue
            break
        yield result


map_dict = stage(_map_dict, state="pass", keeps_count=True)
