"""The checks of a spec's values: each key's type and range, and values shown short in error messages.

Every value of a spec is checked before it is used, so that a wrong type is a
:class:`~shardstream.errors.ConfigError` naming the key and the type it needs (never a ``TypeError`` from deep
inside), and an error message shows a value in at most :data:`SHOWN` characters, whatever its size (a spec's
value can be a huge or shared structure: ``repr`` of it could take gigabytes).

>>> shown(list(range(1000)))
'[0, 1, 2, 3, ...]'
>>> number(3, "choose", integer=True), text("jpg", "format")
(3, 'jpg')
>>> try:
...     number(10**400, "source 0: choose", integer=True)
... except ValueError as e:  # a ConfigError
...     print(e)
source 0: choose must be at most 2**53, not an integer of 401 digits
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

__all__ = ["MAX_COUNT", "SHOWN", "mapping_of_texts", "number", "shown", "text", "texts"]

#: the largest count a spec may give (samples, choose, epoch_size...): 2**53, exact as a float
MAX_COUNT = 2**53
#: the most characters of a value an error message shows
SHOWN = 100

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 4, 4, 4
_REPR.maxfrozenset = _REPR.maxdeque = _REPR.maxarray = 4
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = 60, 40, 60


def shown(value: Any, limit: int = SHOWN) -> str:
    """``repr(value)`` cut short: a few items of each container, a few levels, at most ``limit`` characters (a
    shared or self-referencing structure costs no more than a small one).

    >>> shown("x" * 500)[:20], len(shown("x" * 500)) <= SHOWN
    ("'xxxxxxxxxxxxxxxxxxx", True)
    >>> a = [1]; a.append(a); shown(a)
    '[1, [1, [1, [...]]]]'
    """
    try:
        out = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails (an int too long to print, a broken object)
        out = f"<{type(value).__name__}>"
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _kind(value: Any) -> str:
    """What a wrong value is, for a message: its repr when short, else its type and size."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'over 4000'} digits"
    return shown(value)


def number(value: Any, what: str, *, integer: bool = False, positive: bool = False) -> Any:
    """``value`` (None passes) checked as a number >= 0 (``positive``: > 0), finite; ``integer``: a whole number
    up to :data:`MAX_COUNT`, returned as an int, else a float. ``what`` names the key in the error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what} must be a number >= 0, not {_kind(value)}")
    if isinstance(value, int) and abs(value) > MAX_COUNT:  # before float(): 10**400 has no float
        if value < 0:
            raise ConfigError(f"{what} must be a number >= 0, not {_kind(value)}")
        if integer:
            raise ConfigError(f"{what} must be at most 2**53, not {_kind(value)}")
        if value.bit_length() > 1023:
            raise ConfigError(f"{what} must be a finite number >= 0, not {_kind(value)}")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{what} must be a finite number >= 0, not {_kind(value)}")
    if integer and (int(value) != value or value > MAX_COUNT):
        raise ConfigError(f"{what} must be a whole number up to 2**53, not {_kind(value)}")
    if positive and value <= 0:
        raise ConfigError(f"{what} must be > 0, not {_kind(value)}")
    return int(value) if integer else float(value)


def text(value: Any, what: str, *, numbers: bool = False) -> str:
    """``value`` checked as a string (``numbers``: an integer is taken as its digits, as YAML reads ``name: 7``)."""
    if isinstance(value, str):
        return value
    if numbers and isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**30:
        return str(value)
    raise ConfigError(f"{what} must be a string, not {type(value).__name__} {_kind(value)}")


def texts(value: Any, what: str) -> list[str]:
    """``value`` checked as a string or a list of strings; returned as a list."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ConfigError(f"{what} must be a string or a list of strings; item {i} is "
                                  f"{type(item).__name__} {_kind(item)}")
        return list(value)
    raise ConfigError(f"{what} must be a string or a list of strings, not {type(value).__name__} {_kind(value)}")


def mapping_of_texts(value: Any, what: str, example: str) -> dict[str, str]:
    """``value`` checked as a mapping of strings to strings (``example`` shows one in the message)."""
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise ConfigError(f"{what} must map strings to strings, e.g. {example}; not {_kind(value)}")
