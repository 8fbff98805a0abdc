"""The per-dataset states of the multi-dataset sources (Join, ExactMix, RoundRobin, RandomMix) are pinned.

The literals were saved by the code before these sources shared their per-dataset bookkeeping (issue 27): each must
be saved at the same point again, and restore in a fresh object to the same rest of the epoch. The last test keeps
that bookkeeping in its one home (:mod:`shardstream.pipeline.stages.multisource`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shardstream.join import Join
from shardstream.pipeline.context import Context
from shardstream.pipeline.stages.exactmix import ExactMix
from shardstream.pipeline.stages.mix import RandomMix, RoundRobin
from shardstream.pipeline.stages.multisource import MultiSource, SubCursors

PRIMARY = [{"__key__": f"k{i}", "a": i} for i in range(6)]
SECOND = [{"__key__": f"k{i}", "b": i} for i in (1, 2, 0, 4, 3, 5)]  # out of order: read ahead, held, skipped
THIRD = [{"__key__": f"k{i}", "c": i} for i in (0, 1, 2, 3, 5, 4)]

MAKE = {
    "join": lambda: Join([PRIMARY, SECOND, THIRD], names=["p", "q", "r"], seed=1),
    "exact-mix": lambda: ExactMix([list(range(10)), list(range(100, 104))], counts=[6, 7], seed=2),
    "round-robin": lambda: RoundRobin([list(range(3)), list(range(10, 15))], longest=True),
    "random-mix": lambda: RandomMix([list(range(3)), list(range(10, 15))], probs=[1, 2], longest=True, seed=4),
}

#: (source, items taken) -> (the chain's state saved there, the rest of the epoch)
PINNED: dict[tuple[str, int], tuple[dict[str, Any], list[Any]]] = {
    ("join", 1): ({"primary": {"items": 1}, "partners": [{"at": {"items": 0}, "skip": ["k0"]},
                                                         {"at": {"items": 1}, "skip": []}], "ended": False},
                  ["k1", "k2", "k3", "k4", "k5"]),
    ("join", 2): ({"primary": {"items": 2}, "partners": [{"at": {"items": 0}, "skip": ["k0", "k1"]},
                                                         {"at": {"items": 2}, "skip": []}], "ended": False},
                  ["k2", "k3", "k4", "k5"]),
    ("join", 4): ({"primary": {"items": 4}, "partners": [{"at": {"items": 3}, "skip": ["k3"]},
                                                         {"at": {"items": 4}, "skip": []}], "ended": False},
                  ["k4", "k5"]),
    ("exact-mix", 3): ({"walk": {"taken": [1, 2]}, "passes": [0, 0], "counts": [6, 7], "part": [0, 1],
                        "sources": [{"items": 1}, {"items": 2}]}, [1, 2, 102, 103, 3, 100, 4, 101, 5, 102]),
    ("exact-mix", 8): ({"walk": {"taken": [4, 4]}, "passes": [0, 0], "counts": [6, 7], "part": [0, 1],
                        "sources": [{"items": 4}, {"items": 4}]}, [100, 4, 101, 5, 102]),
    ("exact-mix", 10): ({"walk": {"taken": [5, 5]}, "passes": [0, 1], "counts": [6, 7], "part": [0, 1],
                         "sources": [{"items": 5}, {"items": 1}]}, [101, 5, 102]),
    ("round-robin", 4): ({"draws": 4, "exhausted": [], "next": 0, "longest": True,
                          "sources": [{"items": 2}, {"items": 2}]}, [2, 12, 13, 14]),
    ("round-robin", 7): ({"draws": 8, "exhausted": [0], "next": 0, "longest": True,
                          "sources": [None, {"items": 4}]}, [14]),
    ("random-mix", 5): ({"draws": 5, "exhausted": [], "longest": True, "probs": [1 / 3, 2 / 3],
                         "sources": [{"items": 3}, {"items": 2}]}, [12, 13, 14]),
}


def _keyed(items: list[Any]) -> list[Any]:
    return [x["__key__"] if isinstance(x, dict) else x for x in items]


@pytest.mark.parametrize("case", list(PINNED), ids=repr)
def test_the_state_is_saved_as_before_and_restores(case):
    name, stop = case
    chain, rest = PINNED[case]
    mix = MAKE[name]()
    it = iter(mix)
    for _ in range(stop):
        next(it)
    state = mix.state_dict()
    assert state["chain"] == chain
    assert _keyed(list(it)) == rest
    again = MAKE[name]()
    again.load_state_dict(copy.deepcopy(state))
    assert _keyed(list(again)) == rest


@pytest.mark.parametrize("name", list(MAKE))
def test_every_multi_dataset_source_keeps_its_datasets_with_the_one_bookkeeping(name):
    source = MAKE[name]().pipeline[0]
    assert isinstance(source, MultiSource)
    assert isinstance(source.cursor(Context()).subs, SubCursors)
