"""The epoch orders and the training state at scale: a shard list is planned with a few arrays (never a Python
object per shard), and a saved state does not grow with the shard count or the position."""

from __future__ import annotations

import tracemalloc

import pytest

from shardstream.order import SampleOrder, StreamOrder
from shardstream.training import TrainingDataset, dataset as training_dataset

SHARDS = 100_000


def _live_blocks(make):
    """Memory blocks still held after ``make()`` (its result kept): a few per array, one per Python object."""
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        kept = make()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.count_diff for stat in after.compare_to(before, "filename") if stat.count_diff > 0)
    return grown, kept


@pytest.mark.parametrize("use", [
    lambda lengths: StreamOrder(lengths, seed=0, epoch=0, window=8),
    lambda lengths: StreamOrder(lengths, seed=0, epoch=0, shuffle=False),
    lambda lengths: SampleOrder(lengths, seed=0, epoch=0, shuffle="window", window=8),
], ids=["stream-groups", "stream-in-order", "windows"])
def test_an_order_of_many_shards_holds_arrays_not_an_object_per_shard(use):
    lengths = (7,) * SHARDS

    def build():
        order = use(lengths)  # noqa: B023 (the current lengths, small then large)
        if isinstance(order, StreamOrder):
            assert order.group_shards(3).size and order.runs(0, 10) and order.block_samples(0).size
        else:
            assert order.ids([0, 5, 99]).size == 3
        return order  # its cached arrays stay alive

    warm, lengths = lengths, (7,) * 50  # a first small run: what the first call allocates once (imports, caches)
    build()
    lengths = warm
    blocks, _ = _live_blocks(build)
    assert blocks < 200, f"{blocks} memory blocks kept for {SHARDS} shards"


def test_a_state_does_not_grow_with_the_position_and_its_digest_is_made_once(monkeypatch):
    urls = [f"s3://bucket/shard-{i:06d}.tar" for i in range(1000)]
    ds = TrainingDataset(urls, batch_size=4, shuffle="stream", lengths=[100] * 1000, rank=0, world_size=1)
    plan = ds.plan(world_size=1)
    early, late = ds.state_for(0, plan, 1), ds.state_for(0, plan, plan.num_batches - 1)
    assert len(repr(early)) == len(repr(late)) - len(str(plan.num_batches - 1)) + 1
    made = []
    real = training_dataset.fingerprint
    monkeypatch.setattr(training_dataset, "fingerprint", lambda *a, **k: made.append(1) or real(*a, **k))
    fresh = TrainingDataset(urls, batch_size=4, shuffle="stream", lengths=[100] * 1000, rank=0, world_size=1)
    for _ in range(3):
        fresh.state_dict()
    assert len(made) == 1  # the shard lengths are digested once, not at every save


def test_a_streaming_dataset_keeps_its_shard_list_packed():
    pattern = f"s3://bucket/train/shard-{{000000..{SHARDS - 1:06d}}}.tar"
    TrainingDataset("a-{0..1}.tar", batch_size=4, shuffle="stream", lengths=[7, 7])  # first-call allocations
    blocks, ds = _live_blocks(lambda: TrainingDataset(pattern, batch_size=4, shuffle="stream", lengths=[7] * SHARDS))
    assert blocks < 200, f"{blocks} memory blocks kept for {SHARDS} shard URLs"
    assert ds._urls[SHARDS - 1] == f"s3://bucket/train/shard-{SHARDS - 1:06d}.tar" and len(ds._urls) == SHARDS


def test_a_numeric_pattern_is_packed_without_a_string_per_url(monkeypatch):
    """A stream plan over ``PREFIX{000000..999999}SUFFIX`` packs the URLs directly (a million in well under a
    second, where making them as strings first took longer than the whole plan): the same URLs, in order."""
    from shardstream.io.urls import expand_urls
    from shardstream.training import sources

    pattern = "s3://bucket/train-{000990..001009}.tar"
    want = expand_urls(pattern)
    monkeypatch.setattr(sources, "expand_urls", lambda *a: pytest.fail("the pattern was expanded as strings"))
    dataset = TrainingDataset(pattern, batch_size=4, shuffle="stream", lengths=[3] * len(want), rank=0,
                              world_size=1)
    assert list(dataset._urls) == want and type(dataset._urls).__name__ == "PackedUrls"
    for other in ("t-{1..10}.tar", "a-{00..01}::b-{00..01}", "t-{0..1}{0..1}", "${X}-{0..1}"):
        assert sources.PackedUrls.of_pattern(other) is None, other  # expanded the usual way


def test_a_spec_keeps_a_long_pattern_packed_and_checks_it_by_the_one_rule(monkeypatch):
    """A spec's ``shards:`` pattern of one numeric range of many URLs is kept packed (planning a million URLs
    from a spec took 12-32 s when each was a string checked on its own), equal to its expansion, and still
    refused when it names commands: as written, or after a rewrite rule that turns only some of its URLs into
    commands."""
    from shardstream.errors import UnsafeURLError
    from shardstream.io.packed import PackedUrls
    from shardstream.io.urls import braceexpand
    from shardstream.spec import load_spec

    pattern = f"train/shard-{{000000..{SHARDS - 1:06d}}}.tar"
    load_spec({"prefix": "s3://b/", "sources": [{"shards": "x-{00..01}.tar"}]})  # first-call allocations
    blocks, spec = _live_blocks(lambda: load_spec({"prefix": "s3://b/", "sources": [{"shards": pattern}]}))
    urls = spec.sources[0].urls
    assert blocks < 200, f"{blocks} memory blocks kept for {SHARDS} shard URLs"
    assert isinstance(urls, PackedUrls) and urls == tuple("s3://b/" + u for u in braceexpand(pattern))
    dataset = TrainingDataset(urls, batch_size=4, shuffle="stream", lengths=[7] * SHARDS)
    assert dataset._urls is urls  # handed on packed, not made into strings again

    assert load_spec({"sources": [{"shards": "x-{0..1}.tar"}]}).sources[0].urls == ("x-0.tar", "x-1.tar")
    with pytest.raises(UnsafeURLError, match="PIPE:get 000000"):
        load_spec({"sources": [{"shards": "PIPE:get {000000..009999}"}]})
    assert len(load_spec({"sources": [{"shards": "pipe:get {000000..009999}"}]}, allow_commands=True)
               .sources[0].urls) == 10_000
    monkeypatch.setenv("SHARDSTREAM_URL_REWRITES", "s3://b/train/shard-0077=pipe:./get ")
    with pytest.raises(UnsafeURLError, match="shard-007700"):
        load_spec({"prefix": "s3://b/", "sources": [{"shards": pattern}]})
