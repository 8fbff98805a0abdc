"""Reading a state's fields, checked: the one place where a restored value's type and range are validated.

A state comes from a file, so it may be damaged or tampered with. Every ``load_state_dict`` reads its fields
through :func:`field` (and :func:`ints`, :func:`mapping`, :func:`random_state`), which return the value when it has
the expected type and lies in its range, and otherwise raise a :class:`~shardstream.errors.StateError` naming the
field by its path in the state (``"plan/num_workers"``, ``"chain/upstream/items"``) and what was expected. Nested
restores name their path with :func:`within` (``with within("upstream"): cursor.load_state_dict(state["upstream"])``),
so a cursor deep in a pipeline names the whole path without knowing where it sits. No value is ever printed whole:
:func:`shown` summarises long lists, long strings and huge integers.

The bounds (:data:`MAX_COUNT`, :data:`MAX_RANKS`, :data:`MAX_WORKERS`, :data:`MAX_PIECES`, :data:`MAX_REPLAY`) keep
a restore from allocating or looping without end: a state that needs more is refused.

>>> state = {"plan": {"num_workers": 2**62}}
>>> with within("plan"):
...     field(state["plan"], "num_workers", int, lo=1, hi=MAX_WORKERS, what="this dataset")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
shardstream.errors.StateError: cannot restore this dataset: the state's 'plan/num_workers' is 4611686018427387904; expected an integer in 1..1024...
>>> ints({"taken": [1, 2]}, "taken", length=2, hi=[3, 2], what="this mix")
[1, 2]
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers
import reprlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import StateError

__all__ = ["MAX_COUNT", "MAX_PIECES", "MAX_RANKS", "MAX_REPLAY", "MAX_WORKERS", "SEED_RANGE", "field", "ints",
           "mapping", "path", "problem", "random_state", "refuse", "shown", "within"]

#: the largest count, position or epoch a state may hold (a signed 64-bit integer with room to add to it)
MAX_COUNT = (1 << 62) - 1
#: the most ranks a saved training plan may have
MAX_RANKS = 1 << 20
#: the most DataLoader workers per rank a saved training plan may have
MAX_WORKERS = 1 << 10
#: the most runs (ranks x workers) a saved streaming plan may cut the epoch into (restoring walks them all)
MAX_PIECES = 1 << 20
#: the most items of a replayed source (a shard list: its items are cheap) a restore reads again
MAX_REPLAY = 1 << 20
#: the range of a seed a state may hold (a DataLoader's per-pass seed): an integer of 64 bits, signed or not
SEED_RANGE = (-(1 << 63), (1 << 64) - 1)

_HINT = " (the state is damaged, or was saved by another dataset or version)"
_PATH: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("shardstream_state_path", default=())
_KINDS = {int: "an integer", bool: "True or False", str: "a string", list: "a list", dict: "a dict"}


class _Shown(reprlib.Repr):
    """``reprlib`` with short limits, and huge integers summarised (``repr`` of a 5,000-digit int raises)."""

    def __init__(self, items: int = 6) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict = 3, items, items, 4
        self.maxstring = self.maxother = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 64:
            return f"an integer of {x.bit_length()} bits"
        return repr(x)


_SHOWN = _Shown()


def shown(value: Any, items: int = 6) -> str:
    """``value`` for a message: short, whatever it is (lists cut after ``items`` items).

    >>> shown(10**400), shown(list(range(100))), shown("x" * 100)[:12]
    ('an integer of 1329 bits', '[0, 1, 2, 3, 4, 5, ...]', "'xxxxxxxxxxx")
    """
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return _SHOWN.repr_int(value, 0)
    try:
        return (_SHOWN if items == 6 else _Shown(items)).repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still shown
        return f"a {type(value).__name__}"


@contextlib.contextmanager
def within(*keys: str | int) -> Iterator[None]:
    """Fields read inside the block are under ``keys`` in the state (their :func:`path` starts with them)."""
    token = _PATH.set(_PATH.get() + tuple(str(k) for k in keys))
    try:
        yield
    finally:
        _PATH.reset(token)


def path(key: str | int | None = None) -> str:
    """The path of field ``key`` of the state being read (see :func:`within`).

    >>> with within("chain", "upstream"):
    ...     path("items")
    'chain/upstream/items'
    """
    parts = _PATH.get() + (() if key is None else (str(key),))
    return "/".join(parts)


def refuse(what: str, key: str | int | None, problem: str) -> StateError:
    """The error for field ``key`` (None: the state read now) of ``what``'s state: ``problem`` says what is wrong."""
    where = path(key)
    subject = f"the state's {where!r}" if where else "the state"
    return StateError(f"cannot restore {what}: {subject} {problem}{_HINT}")


def mapping(state: Any, what: str, keys: Sequence[str] = ()) -> Mapping[str, Any]:
    """``state`` if it is a dict holding ``keys``; else a :class:`~shardstream.errors.StateError`.

    >>> mapping({"a": 1}, "x", ("a",))["a"]
    1
    """
    if not isinstance(state, Mapping):
        raise refuse(what, None, f"is {shown(state)}; expected a dict")
    missing = [key for key in keys if key not in state]
    if missing:
        raise refuse(what, None, f"lacks the key{'s' if len(missing) > 1 else ''} "
                                 f"{', '.join(repr(k) for k in missing)}")
    return state


def _expected(kind: Any, lo: int | None, hi: int | None, none: bool) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    words = " or ".join(_KINDS[k] for k in kinds)
    if int in kinds and (lo is not None or hi is not None):
        words += f" in {'-inf' if lo is None else lo}..{'inf' if hi is None else hi}"
    elif hi is not None and (list in kinds or str in kinds):
        words += f" of at most {hi} items"
    return words + (" or None" if none else "")


def _fits(value: Any, kind: Any, lo: int | None, hi: int | None) -> tuple[bool, Any]:
    """Whether ``value`` is of ``kind`` (within ``lo..hi``), and the value as a plain Python value."""
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return False, value
        value = int(value)
        return (lo is None or value >= lo) and (hi is None or value <= hi), value
    if kind is bool:
        return isinstance(value, bool), value
    if kind is str:
        return isinstance(value, str) and (hi is None or len(value) <= hi), value
    if kind is list:
        ok = isinstance(value, (list, tuple)) and (hi is None or len(value) <= hi)
        return ok, list(value) if ok else value
    if kind is dict:
        return isinstance(value, Mapping), value
    raise TypeError(f"no state field kind {kind!r}")  # pragma: no cover - a programming error


def problem(value: Any, kind: Any, *, lo: int | None = None, hi: int | None = None) -> str | None:
    """What is wrong with ``value`` as a field of ``kind`` within ``lo..hi`` (see :func:`field`), or None.

    >>> problem(-1, int, lo=0), problem(3, int, lo=0)
    ('is -1; expected an integer in 0..inf', None)
    """
    if any(_fits(value, one, lo, hi)[0] for one in (kind if isinstance(kind, tuple) else (kind,))):
        return None
    return f"is {shown(value)}; expected {_expected(kind, lo, hi, False)}"


def field(state: Any, key: str, kind: Any, *, what: str, lo: int | None = None, hi: int | None = None,
          none: bool = False, length: int | None = None) -> Any:
    """``state[key]`` checked: of ``kind`` (``int``, ``bool``, ``str``, ``list``, ``dict``, or a tuple of them;
    ``none``: None is allowed), an integer within ``lo..hi`` (``int`` refuses ``True`` and ``1.0``), a string or
    list of at most ``hi`` items, a list of exactly ``length`` items. Returns the value (lists as lists).

    >>> field({"n": 3}, "n", int, lo=0, hi=9, what="x"), field({"u": None}, "u", str, none=True, what="x")
    (3, None)
    >>> field({"n": True}, "n", int, lo=0, what="stage 1 (slice)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    shardstream.errors.StateError: cannot restore stage 1 (slice): the state's 'n' is True; expected an integer in 0..inf...
    """
    state = mapping(state, what)
    if key not in state:
        raise refuse(what, None, f"lacks the key {key!r}")
    value = state[key]
    if value is None and none:
        return None
    for one in kind if isinstance(kind, tuple) else (kind,):
        ok, plain = _fits(value, one, lo, hi)
        if ok:
            if length is not None and len(plain) != length:
                raise refuse(what, key, f"has {len(plain)} items; expected {length}")
            return plain
    raise refuse(what, key, f"is {shown(value)}; expected {_expected(kind, lo, hi, none)}")


def ints(state: Any, key: str, *, what: str, length: int | None = None, lo: int = 0,
         hi: int | Sequence[int] = MAX_COUNT) -> list[int]:
    """``state[key]``, a list of integers (exactly ``length`` of them), item ``i`` within ``lo..hi`` (or
    ``lo..hi[i]``); the error names the item (``"taken/1"``).

    >>> ints({"taken": [1, 5]}, "taken", length=2, hi=[3, 4], what="this mix")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    shardstream.errors.StateError: cannot restore this mix: the state's 'taken/1' is 5; expected an integer in 0..4...
    """
    values = field(state, key, list, what=what, length=length)
    with within(key):
        return [_item(v, i, what, lo, hi if isinstance(hi, int) else hi[i]) for i, v in enumerate(values)]


def _item(value: Any, i: int, what: str, lo: int, hi: int) -> int:
    ok, plain = _fits(value, int, lo, hi)
    if not ok:
        raise refuse(what, i, f"is {shown(value)}; expected {_expected(int, lo, hi, False)}")
    return int(plain)


def random_state(state: Any, key: str, *, what: str) -> tuple[Any, ...]:
    """``state[key]``, the state of a ``random.Random`` as saved by :func:`shardstream.pipeline.cursors.rng_state`
    (``[3, [625 words], gauss]``), checked, as ``Random.setstate`` takes it.

    >>> import random
    >>> r = random.Random(1); version, internal, gauss = r.getstate()
    >>> random_state({"rng": [version, list(internal), gauss]}, "rng", what="x") == r.getstate()
    True
    """
    version, internal, gauss = field(state, key, list, what=what, length=3)
    with within(key):
        if version != 3 or isinstance(version, bool):
            raise refuse(what, 0, f"is {shown(version)}; expected 3 (the version of Python's random state)")
        words = ints({"1": internal}, "1", what=what, length=625, hi=(1 << 32) - 1)
        if words[-1] > 624:
            raise refuse(what, "1/624", f"is {words[-1]}; expected a position in 0..624")
        if gauss is not None and not isinstance(gauss, float):
            raise refuse(what, 2, f"is {shown(gauss)}; expected a float or None")
    return version, tuple(words), gauss
