"""The shuffle's two draw loops give the same order.

``shuffle`` draws in :meth:`ShuffleCursor.__next__` when its input can give items back (a pipeline's chain of
cursors: the buffer is saved as references), and in :meth:`_PlainShuffle._drawing`, a generator, when it cannot (a
plain iterable, a DataLoader). Both must be webdataset's buffered shuffle with the same random draws, so that a
pipeline gives the same order whichever way it runs, and a restored one goes on with the same order. This is a
differential test over a seeded sweep of buffer sizes, initial sizes, input lengths and seeds, with restores at
several points.
"""

from __future__ import annotations

import itertools
import random

import pytest

from shardstream.errors import StateError
from shardstream.pipeline import Context, DataPipeline, detshuffle, shuffle, unlisted
from shardstream.pipeline.cursors import IndexCursor
from shardstream.pipeline.stages.shuffle import ShuffleCursor, _PlainShuffle

BUFSIZES = (2, 3, 5, 16, 100)
INITIALS = (0, 1, 2, 7, 100, 1000)
LENGTHS = (0, 1, 2, 3, 9, 64, 257)
SEEDS = (0, 1, "x")


def plain(stage, items, ctx):
    """The generator loop: the stage called on a one-shot iterator."""
    cursor = stage(iter(items), ctx)
    assert isinstance(cursor, _PlainShuffle)
    return list(cursor)


def chained(stage, items, ctx, stop_at=()):
    """The cursor loop over a restorable input; at each point of ``stop_at`` the state is saved and a new cursor
    restored from it goes on."""
    cursor = stage.cursor_over(IndexCursor(items), ctx, None, "shuffle")
    assert isinstance(cursor, ShuffleCursor) and cursor.restorable
    out = []
    for n in itertools.count():
        if n in stop_at:
            state = cursor.state_dict()
            cursor = stage.cursor_over(IndexCursor(items), ctx, None, "shuffle")
            cursor.load_state_dict(state)
        try:
            out.append(next(cursor))
        except StopIteration:
            return out


def test_draw_loops_agree():
    """Every (bufsize, initial, length, seed) of the sweep: the same order from both loops, and from the cursor
    loop restored at the start, after the first item, in the middle, before the last and at the end."""
    checked = 0
    for bufsize, initial, length, seed in itertools.product(BUFSIZES, INITIALS, LENGTHS, SEEDS):
        items = list(range(length))
        stage, ctx = shuffle(bufsize, initial, seed=seed), Context(seed=5, epoch=2)
        expected = plain(stage, items, ctx)
        assert sorted(expected) == items
        stops = {0, 1, length // 2, max(0, length - 1), length}
        assert chained(stage, items, ctx) == expected, (bufsize, initial, length, seed)
        assert chained(stage, items, ctx, stops) == expected, (bufsize, initial, length, seed)
        checked += 1
    assert checked == len(BUFSIZES) * len(INITIALS) * len(LENGTHS) * len(SEEDS)


@pytest.mark.parametrize("trial", range(40))
def test_draw_loops_agree_on_random_cases(trial):
    """Random cases beyond the grid (sizes, seeds, a restore at a random point), reproducible from ``trial``."""
    r = random.Random(trial)
    bufsize, initial, length = r.randint(2, 300), r.randint(0, 400), r.randint(0, 1500)
    items = [f"i{k}" for k in range(length)]
    stage, ctx = shuffle(bufsize, initial), Context(seed=r.randrange(1 << 30), epoch=r.randrange(5))
    expected = plain(stage, items, ctx)
    assert chained(stage, items, ctx, {r.randint(0, length)}) == expected


def test_detshuffle_and_a_pipeline_take_the_same_draws():
    """``detshuffle`` (its own seed and epoch) and a whole pipeline (the cursor loop, through a DataPipeline)
    agree with the generator loop too."""
    items = list(range(300))
    stage, ctx = detshuffle(20, 5, seed=4, epoch=3), Context(seed=9)
    assert chained(stage, items, ctx, {100}) == plain(stage, items, ctx)
    pipeline = DataPipeline(tuple(items), shuffle(50, 10), seed=7)
    pipeline.set_epoch(1)
    in_chain = list(pipeline)
    here = Context(seed=7, epoch=1, stage=1)
    assert in_chain == plain(shuffle(50, 10), items, here)


def test_a_plain_shuffle_has_a_mark_and_refuses_to_save():
    """Over a plain iterable the shuffle keeps no position: ``mark()`` is None (a stage after it may ask for one,
    as ``unlisted`` does), and saving says why it cannot."""
    cursor = shuffle(10, seed=1)(iter([[1, 2], [3]]))
    assert isinstance(cursor, _PlainShuffle) and cursor.mark() is None
    assert sorted(unlisted()(cursor)) == [1, 2, 3]
    with pytest.raises(StateError, match="shuffle cannot save its buffer: its input cannot give back earlier items"):
        shuffle(10)(iter(range(3))).state_dict()
