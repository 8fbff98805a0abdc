"""The error a decoder raises when a field does not decode: it names the shard, the sample, the field and the
codec (:func:`decode_failure`), and chains the codec's own error (:func:`failure_cause`).

>>> err = decode_failure(ValueError("bad digit"), "a.tar", "k1", "cls")
>>> type(err).__name__, err.field, "as int" in str(err) or "cls" in str(err)
('DecodeError', 'cls', True)
"""

from __future__ import annotations

from typing import Any

from ..errors import DecodeError, MissingDependencyError, add_context
from .table import lookup

__all__ = ["decode_failure", "failure_cause"]


def failure_cause(e: BaseException) -> BaseException | None:
    """What :func:`decode_failure`'s error is raised ``from``: ``e``, or, for a context-free DecodeError of a codec
    (which is replaced), what *it* was caused by."""
    if isinstance(e, DecodeError) and e.url is None and e.key is None and e.field is None:
        return e.__cause__
    return e


def decode_failure(e: Exception, url: Any, key: Any, field: str) -> BaseException:
    """The error to raise for ``e``, met decoding ``field`` of sample ``key`` in shard ``url``: a DecodeError that
    names them and the codec (one already named is kept; a missing dependency keeps its type, with the context
    added)."""
    if isinstance(e, MissingDependencyError):
        return add_context(e, url=url, key=key, field=field)
    if isinstance(e, DecodeError):
        if e.url is None and e.key is None and e.field is None:
            return type(e)(e.problem, url=url, key=key, field=field)
        return e
    what, inner, gz = "the field", field, ""
    found = lookup(inner)
    while found is not None and found[1].kind == "wrapper":
        inner, gz = inner[: -len(found[0]) - 1], " (after gunzip)"
        found = lookup(inner)
    if found is not None:
        what = f".{found[0]} data as {found[1].name}{gz}"
    detail = str(e)
    if len(detail) > 300:
        detail = detail[:300] + "..."
    return DecodeError(f"cannot decode {what}: {type(e).__name__}: {detail}", url=url, key=key, field=field)
