"""Permutations and epoch orders: bijections, determinism from (seed, epoch), locality of the bounded modes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.errors import ConfigError
from shardstream.training import Permutation, SampleOrder, StreamOrder, derive_key
from shardstream.training.iterators import IndexedReader, StreamReader


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 5000), key=st.integers(0, 2**64 - 1))
def test_a_permutation_is_a_bijection_determined_by_its_key(n, key):
    order = Permutation(n, key)(np.arange(n))
    assert sorted(order.tolist()) == list(range(n))
    assert order.tolist() == Permutation(n, key)(np.arange(n)).tolist()
    if n > 20:
        assert order.tolist() != Permutation(n, key + 1)(np.arange(n)).tolist()
        picks = np.array([n - 1, 0, n // 2])
        assert Permutation(n, key)(picks).tolist() == order[picks].tolist()  # any positions, any order


def test_out_of_range_positions_are_refused():
    with pytest.raises(IndexError, match=r"range\(10\)"):
        Permutation(10, 1)([10])
    with pytest.raises(ConfigError):
        Permutation(-1, 1)


def test_keys_depend_on_every_part():
    assert derive_key("global", 0, 1) != derive_key("global", 1, 0) != derive_key("window", 0, 1)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=12), shuffle=st.sampled_from(["global", "window", "none"]),
       window=st.integers(1, 5), epoch=st.integers(0, 3))
def test_every_sample_order_is_a_permutation_of_all_samples(lengths, shuffle, window, epoch):
    order = SampleOrder(tuple(lengths), seed=7, epoch=epoch, shuffle=shuffle, window=window)
    ids = order.ids(np.arange(order.total)).tolist()
    assert sorted(ids) == list(range(sum(lengths)))
    assert ids == order.ids(np.arange(order.total)).tolist()


def test_orders_change_with_the_epoch_and_the_seed_and_none_is_in_order():
    lengths = (50, 50, 50)
    a = SampleOrder(lengths, seed=1, epoch=0).ids(range(150)).tolist()
    assert a != SampleOrder(lengths, seed=1, epoch=1).ids(range(150)).tolist()
    assert a != SampleOrder(lengths, seed=2, epoch=0).ids(range(150)).tolist()
    assert SampleOrder(lengths, shuffle="none").ids(range(150)).tolist() == list(range(150))


def test_a_window_reads_only_its_shards():
    lengths = (10,) * 12
    order = SampleOrder(lengths, seed=3, epoch=0, shuffle="window", window=3)
    shards = order.ids(range(120)) // 10
    for start in range(0, 120, 30):  # each window of 3 shards is served before the next one starts
        assert len(set(shards[start : start + 30].tolist())) == 3
    assert len(set(shards[:30].tolist()) | set(shards[30:60].tolist())) == 6


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(0, 30), min_size=1, max_size=8), window=st.integers(1, 4),
       buffer=st.integers(1, 25), shuffle=st.booleans())
def test_stream_blocks_cover_every_sample_once(lengths, window, buffer, shuffle):
    order = StreamOrder(tuple(lengths), seed=0, epoch=1, shuffle=shuffle, window=window, buffer=buffer)
    blocks = [order.block_samples(m) for m in range(order.num_blocks)]
    assert sorted(int(s) for block in blocks for s in block) == list(range(sum(lengths)))
    for m, block in enumerate(blocks):
        assert sorted(order.block_order(m).tolist()) == list(range(len(block)))


def test_stream_groups_interleave_their_shards_and_read_each_front_to_back():
    lengths = (20,) * 6
    order = StreamOrder(lengths, seed=0, epoch=0, window=3, buffer=10)
    samples = np.concatenate([order.block_samples(m) for m in range(order.num_blocks)])
    first_group = samples[:60] // 20
    assert len(set(first_group.tolist())) == 3 and len(set(first_group[:10].tolist())) > 1  # interleaved
    for shard in set(first_group.tolist()):
        within = samples[:60][first_group == shard] % 20
        assert within.tolist() == list(range(20))  # each shard is read in order: streaming works


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 60), min_size=1, max_size=8), shuffle=st.sampled_from(["global", "window", "none"]),
       block=st.integers(1, 50), batches=st.lists(st.tuples(st.integers(0, 500), st.integers(1, 40)), max_size=8))
def test_the_indexed_reader_computes_the_orders_ids(lengths, shuffle, block, batches):
    order = SampleOrder(tuple(lengths), seed=3, epoch=1, shuffle=shuffle, window=2)
    reader = IndexedReader(None, order, block=block)  # type: ignore[arg-type]  # only its ids are used here
    total = order.total
    for start, size in batches:
        if total == 0:
            break
        positions = np.arange(start, start + size, dtype=np.int64) % total
        assert reader.ids(positions).tolist() == order.ids(positions).tolist()
    for outside in ([total], [-1, 0]):  # what the order says about positions outside the epoch, the reader says
        assert _outcome(reader.ids, outside) == _outcome(order.ids, outside)


def _outcome(ids, positions):
    try:
        return ids(np.array(positions, dtype=np.int64)).tolist()
    except IndexError as e:
        return str(e)


@settings(max_examples=25, deadline=None)
@given(window=st.integers(1, 3), buffer=st.integers(1, 30),
       reads=st.lists(st.tuples(st.integers(0, 58), st.integers(1, 25)), min_size=1, max_size=10))
def test_the_stream_reader_serves_the_orders_samples_at_any_positions(shards, window, buffer, reads):
    """Forward, backward (a reopened shard) and across blocks: the samples of the order, position by position."""
    order = StreamOrder((12, 12, 12, 12, 11), seed=5, epoch=2, window=window, buffer=buffer)
    expected = np.concatenate([order.block_samples(b)[order.block_order(b)] for b in range(order.num_blocks)])
    reader = StreamReader(tuple(shards), order)
    try:
        for start, size in reads:
            positions = np.arange(start, min(start + size, order.total), dtype=np.int64)
            got = [int(s["__key__"][1:]) for s in reader.read(positions)]
            assert got == expected[positions].tolist()
        assert reader.read(np.array([58, 0, 57], dtype=np.int64))[1]["__key__"] == f"s{expected[0]:05d}"
    finally:
        reader.close()


@pytest.mark.parametrize("n", [2, 3, 17, 1000, 65_537, 2**40 + 3])
def test_the_c_permutation_is_the_numpy_one(n, monkeypatch):
    from shardstream.order.permute import position_permuter
    from shardstream.tar import reader

    if position_permuter() is None:
        pytest.skip("no C extension")
    positions = np.arange(n) if n <= 1000 else np.unique(np.random.default_rng(n).integers(0, n, 4000))
    for key in (0, 7, 2**63 + 5):
        perm = Permutation(n, key)
        fast = perm(positions)
        monkeypatch.setattr(reader, "USE_ACCELERATOR", False)
        slow = perm(positions)
        monkeypatch.setattr(reader, "USE_ACCELERATOR", True)
        assert fast.dtype == slow.dtype == np.int64 and fast.tolist() == slow.tolist()
    with pytest.raises(IndexError):
        Permutation(n, 1)([n])


class _Counted:
    """An order that counts the calls of ``ids``."""

    def __init__(self, order):
        self.order, self.total, self.calls = order, order.total, 0

    def ids(self, positions):
        self.calls += 1
        return self.order.ids(positions)


@pytest.mark.parametrize("step", [1, 3])
def test_an_epoch_read_forward_computes_each_block_once(step):
    """Batches of 100 positions (every ``step``-th: one rank of ``step``) read in order, blocks of 256: a batch
    that straddles two blocks starts the next block, which then serves the batches after it."""
    order = SampleOrder((700, 700, 600), seed=3, epoch=1, shuffle="global")
    counted = _Counted(order)
    reader = IndexedReader(None, counted, block=256 * step)  # type: ignore[arg-type]  # only its ids are used here
    for start in range(0, order.total - 100 * step + 1, 100 * step):
        positions = np.arange(start, start + 100 * step, step, dtype=np.int64)
        assert reader.ids(positions).tolist() == order.ids(positions).tolist()
    assert counted.calls <= 10  # about 2000 / 200: each block serves two batches and starts the third's
