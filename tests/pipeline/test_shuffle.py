"""Shuffling: a permutation, deterministic from (seed, epoch[, rank, worker]), no global random state."""

from __future__ import annotations

import random

from shardstream.pipeline import Context, DataPipeline, Placement, shuffle, split_by_worker
from shardstream.pipeline.iteration import build_chain


def run(ctx, n=50, bufsize=20, initial=5):
    return list(shuffle(bufsize, initial)(range(n), ctx))


def test_a_permutation_that_actually_shuffles():
    order = run(Context(seed=0))
    assert sorted(order) == list(range(50)) and order != list(range(50))


def test_determined_by_seed_and_epoch():
    a = Context(seed=5, epoch=1)
    assert run(a) == run(a)
    assert run(a) != run(a.replace(epoch=2)) and run(a) != run(a.replace(seed=6))


def test_explicit_seed_and_rng_arguments():
    ctx = Context(seed=0)
    assert list(shuffle(10, seed=9)(range(30), ctx)) == list(shuffle(10, seed=9)(range(30), ctx.replace(seed=1)))
    rng_order = list(shuffle(10, rng=random.Random(4))(range(30), ctx))
    assert rng_order == list(shuffle(10, rng=random.Random(4))(range(30), ctx.replace(epoch=3)))


def test_does_not_touch_the_global_random_state():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    run(Context())
    list(DataPipeline(range(100), shuffle(10)))
    assert random.random() == expected


def test_workers_differ_after_a_split_but_agree_before():
    def worker_ctx(i):
        return Context(seed=0, placement=Placement(worker=i, num_workers=2))

    after = [run(worker_ctx(i)) for i in range(2)]
    assert after[0] != after[1]
    before = [run(worker_ctx(i).replace(shared=True)) for i in range(2)]
    assert before[0] == before[1]


def test_pipeline_shuffle_before_split_keeps_the_split_exact():
    """webdataset's README puts shuffle(100) before split_by_worker: every worker must agree on that order."""
    pipeline = DataPipeline(range(40), shuffle(100), split_by_worker, shuffle(10))
    seen = []
    for worker in range(3):
        ctx = Context(seed=0, placement=Placement(worker=worker, num_workers=3))
        last = max(i for i, s in enumerate(pipeline.pipeline) if getattr(s, "splits", False))
        seen += list(build_chain(pipeline.pipeline, ctx, last))
    assert sorted(seen) == list(range(40))


def test_small_buffers_pass_through():
    assert list(shuffle(1)(range(5))) == list(range(5))
    assert sorted(shuffle(3, initial=100)(range(10))) == list(range(10))
