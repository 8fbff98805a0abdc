"""Each stage that keeps state between items gives fixed reference outputs (and its errors) whether it runs
directly on an iterable (``stage(items, ctx)``) or inside a resumable chain of cursors.

The expected lists were recorded from the generator implementations that served plain iteration before the
cursors became the only implementation of these stages (issue 11; the test compared both then): they pin that
the outputs did not change."""

from __future__ import annotations

import pytest

from shardstream.errors import WorkerSplitError
from shardstream.pipeline import (
    Context,
    Placement,
    check_empty,
    detshuffle,
    repeat,
    rsample,
    shuffle,
    slice,
    split_by_node,
    split_by_worker,
    unbatched,
    unlisted,
    with_epoch,
)
from shardstream.pipeline.cursors import IndexCursor

WORKER_1_OF_3 = Context(placement=Placement(worker=1, num_workers=3))

CASES = {
    "shuffle": (shuffle(5, initial=2, seed=3), list(range(20)), Context(),
                [1, 3, 5, 4, 2, 6, 9, 8, 12, 7, 11, 13, 0, 16, 18, 17, 14, 19, 10, 15]),
    "shuffle-ctx": (shuffle(100), list(range(10)), Context(seed=7, epoch=1), [0, 2, 3, 7, 9, 6, 5, 4, 1, 8]),
    "shuffle-worker": (shuffle(4), list(range(12)), Context(seed=1, placement=Placement(worker=1, num_workers=2)),
                       [3, 1, 0, 4, 5, 8, 9, 6, 10, 11, 2, 7]),
    "detshuffle": (detshuffle(4, seed=1, epoch=2), list(range(9)), Context(seed=5), [2, 0, 1, 4, 5, 6, 3, 7, 8]),
    "repeat": (repeat(3), [1, 2], Context(), [1, 2, 1, 2, 1, 2]),
    "repeat-nbatches": (repeat(nbatches=5), list(range(3)), Context(), [0, 1, 2, 0, 1]),
    "with_epoch": (with_epoch(7), list(range(3)), Context(), [0, 1, 2, 0, 1, 2, 0]),
    "with_epoch-0": (with_epoch(0), list(range(3)), Context(), []),
    "split_by_worker": (split_by_worker, list(range(10)), WORKER_1_OF_3, [1, 4, 7]),
    "split_by_node": (split_by_node, list(range(7)), Context(placement=Placement(rank=1, world_size=2)), [1, 3, 5]),
    "check_empty": (check_empty(), [3, 1], Context(), [3, 1]),
    "slice": (slice(1, 8, 3), list(range(10)), Context(), [1, 4, 7]),
    "slice-stop": (slice(4), list(range(10)), Context(), [0, 1, 2, 3]),
    "rsample": (rsample(0.3), list(range(30)), Context(seed=5), [18, 20, 24, 27]),
    "unbatched": (unbatched(), [{"x": [1, 2], "k": ["a", "b"]}, ([3, 4], ["c", "d"])], Context(),
                  [{"x": 1, "k": "a"}, {"x": 2, "k": "b"}, (3, "c"), (4, "d")]),
    "unlisted": (unlisted(), [[1, 2], [], [3]], Context(), [1, 2, 3]),
}


def in_chain(stage, items, ctx):
    """The stage's cursor over a cursor source, as a resumable pipeline builds it."""
    restart = (lambda cycle: IndexCursor(items)) if stage.restarts else None
    return stage.cursor_over(IndexCursor(items), ctx, restart, stage.spec.name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_direct_call_gives_the_reference_output(name):
    stage, items, ctx, expected = CASES[name]
    assert list(stage(items, ctx)) == expected
    assert list(stage(iter(items), ctx)) == expected or stage.restarts  # a one-shot iterator repeats nothing


@pytest.mark.parametrize("name", sorted(CASES))
def test_cursor_gives_the_reference_output(name):
    stage, items, ctx, expected = CASES[name]
    assert list(in_chain(stage, items, ctx)) == expected


@pytest.mark.parametrize("stage, ctx, message", [
    (split_by_worker, WORKER_1_OF_3, "DataLoader worker 1 of 3 received no shard: there is only 1 shard"),
    (split_by_node, Context(placement=Placement(rank=2, world_size=3)), "rank 2 of 3 received no shard"),
    (check_empty(), Context(), "no samples at all came out of the shards"),
])
def test_errors_at_the_end_are_the_same(stage, ctx, message):
    items = [0] if stage.spec.name != "check_empty" else []
    with pytest.raises(WorkerSplitError, match=message):
        list(stage(items, ctx))
    with pytest.raises(WorkerSplitError, match=message):
        list(in_chain(stage, items, ctx))
