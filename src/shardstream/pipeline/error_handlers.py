"""Error handlers: what a stage does when processing one sample or one shard fails.

A handler receives the exception and returns True to skip the item and go on, False to stop the stream, or
raises. Before a handler sees an exception, the stage attaches where it happened (shard URL, sample key,
field) with :func:`~shardstream.errors.add_context`, so every warning and traceback names them.

>>> import warnings
>>> err = ValueError("bad value")
>>> _ = annotate(err, url="s.tar", key="k1", field="cls")
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     warn_and_continue(err)
True
>>> print(caught[0].message)
ValueError: bad value (shard 's.tar', sample 'k1', field 'cls'); skipped
>>> ignore_and_stop(err), ignore_and_continue(err)
(False, True)
"""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import add_context

__all__ = [
    "PipelineWarning",
    "annotate",
    "describe",
    "ignore_and_continue",
    "ignore_and_stop",
    "reraise_exception",
    "warn_and_continue",
    "warn_and_stop",
]

_CONTEXT = ("url", "key", "field")


class PipelineWarning(UserWarning):
    """A sample or shard was skipped (or the stream stopped) because of an error, under a warning handler."""


def annotate(exn: BaseException, sample: Any = None, **context: Any) -> BaseException:
    """Attach ``url``/``key`` (from ``sample``'s ``__url__``/``__key__`` when it is a dict) and ``field`` to
    ``exn``, skipping what the exception already carries. Returns ``exn``."""
    if isinstance(sample, dict):
        context.setdefault("url", sample.get("__url__"))
        context.setdefault("key", sample.get("__key__"))
    new = {k: v for k, v in context.items() if v is not None and getattr(exn, k, None) is None}
    if new:
        add_context(exn, **new)
    return exn


def describe(exn: BaseException) -> str:
    """One line: the exception and where it happened (shard, sample, field), as far as known."""
    text = f"{type(exn).__name__}: {exn}"
    where = []
    for name, label in zip(_CONTEXT, ("shard", "sample", "field"), strict=True):
        value = getattr(exn, name, None)
        if value is not None and repr(value) not in text:
            where.append(f"{label} {value!r}")
    return text + (f" ({', '.join(where)})" if where else "")


def reraise_exception(exn: BaseException) -> bool:
    """The default handler: raise the exception (with its context attached)."""
    raise exn


def warn_and_continue(exn: BaseException) -> bool:
    """Warn (naming shard, sample and field) and skip the item. Never sleeps."""
    warnings.warn(describe(exn) + "; skipped", PipelineWarning, stacklevel=2)
    return True


def ignore_and_continue(exn: BaseException) -> bool:
    """Skip the item silently."""
    return True


def warn_and_stop(exn: BaseException) -> bool:
    """Warn (naming shard, sample and field) and end the stream."""
    warnings.warn(describe(exn) + "; stopping", PipelineWarning, stacklevel=2)
    return False


def ignore_and_stop(exn: BaseException) -> bool:
    """End the stream silently."""
    return False
