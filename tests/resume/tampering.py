"""Tampered states for every resumable object: genuine states taken after a few steps, and their mutations.

:data:`RESUMABLES` makes each resumable object of shardstream over small shards written once per process
(:func:`data`); :func:`genuine_state` iterates one a few steps and takes its ``state_dict()``; :func:`mutations`
yields every field of a state replaced by a value of another type, out of range, huge (``2**62``, ``10**400``),
None, a list of another length, nested garbage, deleted, or with an extra key. :func:`restore` loads one state
into a fresh object and iterates at most ``steps`` items: what comes out must be a
:class:`~shardstream.errors.StateError` (or, for a join, the typed error of partners that disagree), never
another exception. :func:`fuzz_one` is the same check driven by bytes, for a fuzzer.
"""

from __future__ import annotations

import copy
import functools
import random
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import shardstream as wds
from shardstream.errors import MissingPartnerError, StateError
from shardstream.indexed import IndexedDataset
from shardstream.indexed.mixsampler import ExactMixSampler
from shardstream.join import Join
from shardstream.pipeline import (
    DataPipeline,
    ExactMix,
    RandomMix,
    RoundRobin,
    batched,
    repeat,
    rsample,
    shuffle,
    slice,
    unbatched,
    with_epoch,
)
from shardstream.testing import write_shards
from shardstream.training import TrainingDataset, TrainingLoader

#: what may come out of a restore besides a StateError: partners restored at positions that do not match
ALSO_TYPED: dict[str, tuple[type[BaseException], ...]] = {"join": (MissingPartnerError,)}


@functools.cache
def data() -> dict[str, list[str]]:
    """Small shard sets (written once per process): ``a`` and ``b`` with sidecar indexes, ``c`` with other fields."""
    folder = tempfile.mkdtemp(prefix="tampered-states-")
    fields = {"txt": lambda s, i, n: f"t{n}", "cls": lambda s, i, n: n}
    return {
        "a": write_shards(f"{folder}/a", [5, 5, 4], fields, index=True),
        "b": write_shards(f"{folder}/b", [5, 5, 4], fields, index=True),
        "c": write_shards(f"{folder}/c", [5, 5, 4], {"json": lambda s, i, n: {"n": n}}),
    }


def _spec() -> dict[str, Any]:
    return {"epoch_size": 12, "sources": [{"shards": data()["a"], "proportion": 0.5},
                                          {"shards": data()["b"], "proportion": 0.5}]}


#: every resumable object: name -> a function making a fresh one
RESUMABLES: dict[str, Callable[[], Any]] = {
    "pipeline": lambda: DataPipeline(range(30), shuffle(5), batched(3), unbatched(), slice(1, 25), rsample(0.9),
                                     with_epoch(40)),
    "pipeline-repeat": lambda: DataPipeline(range(7), shuffle(3), repeat(3)),
    "webdataset": lambda: wds.WebDataset(data()["a"], shardshuffle=True, seed=3).shuffle(4).batched(2),
    "training": lambda: TrainingDataset(data()["a"], batch_size=3, seed=1),
    "training-stream": lambda: TrainingDataset(data()["a"], batch_size=3, seed=1, shuffle="stream", window=2,
                                               buffer=4),
    "training-spec": lambda: TrainingDataset(_spec(), batch_size=3, seed=1),
    "training-loader": lambda: TrainingLoader(TrainingDataset(data()["a"], batch_size=3, seed=1), num_workers=0),
    "indexed": lambda: IndexedDataset(data()["a"]),
    "mix-sampler": lambda: ExactMixSampler(sizes=[10, 5], counts=[8, 6], seed=0),
    "join": lambda: Join([wds.WebDataset(data()["a"], shardshuffle=False),
                          wds.WebDataset(data()["c"], shardshuffle=False)]),
    "random-mix": lambda: RandomMix([range(10), range(10, 20)], seed=1),
    "round-robin": lambda: RoundRobin([range(10), range(10, 20)], longest=True),
    "exact-mix": lambda: ExactMix([range(10), range(10, 20)], counts=[6, 4], seed=0),
    "spec-mix": lambda: wds.WebDataset(_spec()),
    "web-loader": lambda: wds.WebLoader(wds.WebDataset(data()["a"], shardshuffle=True).shuffle(4), batch_size=None,
                                        num_workers=0).batched(2),
    "training-in-a-mix": lambda: RoundRobin([TrainingDataset(data()["a"], batch_size=2, seed=1, shuffle="window"),
                                             TrainingDataset(data()["b"], batch_size=3, seed=2, shuffle="stream")]),
}


@functools.cache
def _genuine(name: str, steps: int) -> Any:
    obj = RESUMABLES[name]()
    it = iter(obj)
    for _ in range(steps):
        next(it)
    return obj.state_dict()


def genuine_state(name: str, steps: int = 3) -> Any:
    """The state of a fresh ``RESUMABLES[name]`` after ``steps`` items (a copy: mutate it freely)."""
    return copy.deepcopy(_genuine(name, steps))


def _garbage() -> Any:
    nested: Any = "x"
    for _ in range(60):
        nested = [nested, {"k": nested}]
    return nested


#: the values a field is replaced by (besides deleting it and changing a list's length)
VALUES: dict[str, Callable[[], Any]] = {
    "string": lambda: "x", "negative": lambda: -1, "huge": lambda: 2**62, "vast": lambda: 10**400,
    "none": lambda: None, "float": lambda: 1.5, "nan": lambda: float("nan"), "bool": lambda: True,
    "list": lambda: [1, [2]], "dict": lambda: {"a": {}}, "long-list": lambda: list(range(2000)),
    "garbage": _garbage,
}


def fields(state: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every ``(path, value)`` under ``state``, the root excluded; of a list longer than 4 items (a random
    generator's 625 words), only the first two and the last are visited."""
    if isinstance(state, dict):
        items: Any = state.items()
    elif isinstance(state, list):
        chosen = range(len(state)) if len(state) <= 4 else (0, 1, len(state) - 1)
        items = ((i, state[i]) for i in chosen)
    else:
        return
    for key, value in items:
        yield (*path, key), value
        yield from fields(value, (*path, key))


def _replaced(state: Any, path: tuple[Any, ...], change: Callable[[Any, Any], None]) -> Any:
    out = copy.deepcopy(state)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    change(parent, path[-1])
    return out


def mutations(state: Any) -> Iterator[tuple[str, str, Any]]:
    """``(path, what was done, the mutated state)`` for every field of ``state`` and every mutation."""
    for path, value in fields(state):
        where = "/".join(str(k) for k in path)
        for label, make in VALUES.items():
            yield where, label, _replaced(state, path, lambda parent, key, make=make: parent.__setitem__(key, make()))
        yield where, "missing", _replaced(state, path, lambda parent, key: parent.__delitem__(key))
        if isinstance(value, list) and value:
            yield where, "shorter", _replaced(state, path, lambda parent, key: parent[key].pop())
            yield where, "longer", _replaced(state, path, lambda parent, key: parent[key].append(0))
        if isinstance(value, dict):
            yield where, "extra-key", _replaced(state, path, lambda parent, key: parent[key].update(zzz=1))


def restore(name: str, state: Any, steps: int = 60) -> str:
    """Load ``state`` into a fresh ``RESUMABLES[name]`` and iterate at most ``steps`` items: ``"restored"``, or
    ``"refused at load: <message>"`` / ``"refused at iter: <message>"`` for a StateError (or an error of
    :data:`ALSO_TYPED`). Anything else propagates."""
    obj = RESUMABLES[name]()
    typed = (StateError, *ALSO_TYPED.get(name, ()))
    try:
        obj.load_state_dict(state)
    except typed as e:
        return f"refused at load: {e}"
    try:
        it = iter(obj)
        for _ in range(steps):
            next(it)
    except StopIteration:
        pass
    except typed as e:
        return f"refused at iter: {e}"
    return "restored"


def fuzz_one(data: bytes) -> None:
    """A fuzz target: ``data`` chooses a resumable object, a field of its genuine state, and a mutation; restoring
    the mutated state must give a StateError (see :func:`restore`) or work, and no other exception."""
    rng = random.Random(data)
    name = rng.choice(sorted(RESUMABLES))
    state = genuine_state(name, rng.randrange(1, 5))
    paths = [path for path, _ in fields(state)]
    for _ in range(1 + rng.randrange(3)):  # one to three fields changed
        path = rng.choice(paths)
        try:
            if rng.random() < 0.1:
                state = _replaced(state, path, lambda parent, key: parent.__delitem__(key))
            else:
                value = VALUES[rng.choice(sorted(VALUES))]() if rng.random() < 0.7 else rng.randrange(-3, 50)
                state = _replaced(state, path, lambda parent, key, value=value: parent.__setitem__(key, value))
        except (KeyError, IndexError, TypeError, AttributeError):  # an earlier change removed the path
            continue
    restore(name, state)
