"""Fuzz target: resumable states (``load_state_dict``) of every resumable object, mutated from genuine ones.

The seeds are made when a run starts (:func:`seeds`): small shards and stream files are written to a temporary
folder, each object of :data:`FACTORIES` is iterated a little, and its ``state_dict()`` is kept, its folder
written ``@DATA@`` (so a saved finding replays anywhere). An input is JSON ``{"factory": NAME, "state": STATE}``:
a fresh object of that factory loads the state and is iterated for a few items. Allowed: items, or a
:class:`~shardstream.errors.ConfigError` (:class:`~shardstream.errors.StateError` is one) from the load or the
iteration. Findings besides those of :func:`targets.outcome`: a state that makes the object run a command (a
``pipe:`` URL put in a state must never run: the mutations plant one that would create a file).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import os
import random
import tempfile
from collections.abc import Callable
from typing import Any

from targets import Finding, outcome

from shardstream.errors import ConfigError

PLACEHOLDER = "@DATA@"
ITEMS = 12  # items read after a restore
_DIR = tempfile.mkdtemp(prefix="shardstream-fuzz-state-")
PWNED = os.path.join(_DIR, "pwned")


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    """Write the shards and stream files the factories read (once a process)."""
    from shardstream.indexed import index_dataset
    from shardstream.streams import RecordWriter
    from shardstream.testing import write_shards

    a = write_shards(os.path.join(_DIR, "a"), [5, 4, 6], index=True)
    b = write_shards(os.path.join(_DIR, "b"), [5, 4, 6], lambda s, i, n: {"json": {"n": n}}, index=True)
    index = index_dataset(a, os.path.join(_DIR, "ds.json")).path
    records = os.path.join(_DIR, "r.cbors")
    with RecordWriter(records) as w:
        for i in range(7):
            w.write([i, str(i)])
    return {"a": a, "b": b, "index": index, "records": records}


def _factories() -> dict[str, Callable[[], Any]]:
    import shardstream as wds
    from shardstream.indexed import IndexedDataset
    from shardstream.indexed.mixsampler import ExactMixSampler
    from shardstream.join import Join
    from shardstream.pipeline import DataPipeline, RandomMix, RoundRobin, SimpleShardList, shuffle
    from shardstream.pipeline.stages.exactmix import ExactMix
    from shardstream.pipeline.stages.records import cbors_to_samples
    from shardstream.training import TrainingDataset, TrainingLoader

    d = _data()
    a, b = d["a"], d["b"]
    return {
        "webdataset": lambda: wds.WebDataset(a, shardshuffle=True, seed=3).shuffle(5).decode().batched(2),
        "webdataset-resampled": lambda: wds.WebDataset(a, resampled=True, seed=1).shuffle(4).with_epoch(20),
        "training": lambda: TrainingDataset(a, batch_size=3, seed=1),
        "training-window": lambda: TrainingDataset(a, batch_size=2, seed=2, shuffle="window"),
        "training-iterator": lambda: iter(TrainingDataset(a, batch_size=3, seed=1)),
        "loader": lambda: TrainingLoader(TrainingDataset(a, batch_size=3, seed=1), num_workers=0),
        "indexed": lambda: IndexedDataset(d["index"]),
        "join": lambda: Join([wds.WebDataset(a), wds.WebDataset(b)], names=["x", "y"]).shuffle(3, seed=2),
        "randommix": lambda: RandomMix([wds.WebDataset(a), wds.WebDataset(b)], probs=[2, 1], seed=4).shuffle(3),
        "roundrobin": lambda: RoundRobin([wds.WebDataset(a), range(10)]),
        "exactmix": lambda: ExactMix([wds.WebDataset(a), range(100)], counts=[6, 4], seed=1),
        "records": lambda: DataPipeline(SimpleShardList([d["records"]]), cbors_to_samples(), shuffle(2)),
        "sampler": lambda: ExactMixSampler([10, 20], [6, 4], num_replicas=1, rank=0, seed=0),
    }


FACTORIES = functools.lru_cache(maxsize=1)(_factories)


def seeds() -> list[tuple[str, bytes]]:
    """``(name, input)`` for a state of each factory taken after a few items (and one at the start)."""
    out = []
    for name, make in FACTORIES().items():
        for steps in (0, 3):
            obj = make()
            it = obj if name == "training-iterator" else iter(obj)
            for _ in itertools.islice(it, steps):
                pass
            state = obj.state_dict()
            text = json.dumps({"factory": name, "state": state}).replace(_DIR, PLACEHOLDER)
            out.append((f"state-{name}-{steps}.json", text.encode()))
    return out


def check_state(name: str, data: bytes, rng: random.Random) -> None:
    """A fresh object of the input's factory loads the state and gives a few items, or a ConfigError."""
    try:
        doc = json.loads(data.decode("utf-8", "replace").replace(PLACEHOLDER, _DIR))
        make = FACTORIES()[doc["factory"]]
        state = doc["state"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return  # not an input of this target
    factory = doc["factory"]

    def restore() -> list[Any]:
        obj = make()
        obj.load_state_dict(state)
        it = obj if factory == "training-iterator" else iter(obj)
        return list(itertools.islice(it, ITEMS))

    try:
        outcome(restore, (ConfigError,))
    finally:
        if os.path.exists(PWNED):
            os.unlink(PWNED)
            raise Finding("restoring a state ran a command named in it")


_HOSTILE: list[Any] = [None, True, False, -1, 0, 1, 2, 7, 2**31, 2**63, 2**64, 10**30, -(2**63), 1.5, float("nan"),
                       float("inf"), "", "x", "0", [], {}, [0], [None], {"a": 1}, [[]], "shardstream.state",
                       f"pipe:touch {PLACEHOLDER}/pwned", f"{PLACEHOLDER}/b/shard-000000.tar", "/etc/passwd",
                       f"{PLACEHOLDER}/r.cbors", list(range(700))]  # fmt: skip


def mutate_state(rng: random.Random, data: bytes) -> bytes:
    """One to three values of the state replaced (by a hostile value, a nearby number, another part of the state,
    or a part of another factory's state), keys removed or added, lists cut or grown; or the factory swapped."""
    try:
        doc = json.loads(data)
        state = doc["state"]
    except (ValueError, KeyError, TypeError):
        return data
    if rng.random() < 0.05:
        doc["factory"] = rng.choice(sorted(FACTORIES()))
    else:
        nodes = list(_nodes(state))
        for _ in range(rng.randint(1, 3)):
            parent, key, value = rng.choice(nodes) if nodes else (None, None, state)
            new = _replacement(rng, value, nodes)
            if parent is None:
                state = new
            elif isinstance(parent, dict) and rng.random() < 0.1:
                parent.pop(key, None)
            elif isinstance(parent, dict) and rng.random() < 0.05:
                parent[rng.choice(["extra", "epoch", "version", "kind", "chain", "upstream"])] = new
            elif isinstance(parent, dict) or key < len(parent):
                parent[key] = new
        doc["state"] = state
    return json.dumps(doc).encode()


def _nodes(node: Any, depth: int = 0) -> Any:
    """``(parent, key, value)`` of every value under ``node``."""
    if depth > 40:
        return
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield node, key, value
        yield from _nodes(value, depth + 1)


def _replacement(rng: random.Random, value: Any, nodes: list[Any]) -> Any:
    roll = rng.random()
    if isinstance(value, bool) or roll < 0.3:
        return copy.deepcopy(rng.choice(_HOSTILE))
    if isinstance(value, int) and roll < 0.7:
        return value + rng.choice([-2, -1, 1, 2, 10, 1000, 10**9])
    if isinstance(value, list) and roll < 0.7:
        value = list(value)
        if value and rng.random() < 0.5:
            del value[rng.randrange(len(value)):]
        else:
            value.append(copy.deepcopy(rng.choice(value)) if value else 0)
        return value
    if roll < 0.85 and nodes:
        return copy.deepcopy(rng.choice(nodes)[2])
    return copy.deepcopy(rng.choice(_HOSTILE))
