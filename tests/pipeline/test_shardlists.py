"""Brace expansion, shard lists and resampling."""

from __future__ import annotations

import pathlib

import pytest

from shardstream.errors import ConfigError, UnbalancedBracesError
from shardstream.pipeline import Context, Placement, ResampledShards, SimpleShardList, braceexpand, expand_urls


@pytest.mark.parametrize(
    "pattern,expected",
    [
        ("shard-{000000..000002}.tar", ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]),
        ("{8..11}", ["8", "9", "10", "11"]),
        ("{08..11}", ["08", "09", "10", "11"]),
        ("{3..1}", ["3", "2", "1"]),
        ("{0..9..4}", ["0", "4", "8"]),
        ("{-1..1}", ["-1", "0", "1"]),
        ("{a..c}", ["a", "b", "c"]),
        ("{a,b}{1,2}", ["a1", "a2", "b1", "b2"]),
        ("x{a,b{0..1}}y", ["xay", "xb0y", "xb1y"]),
        ("{a,{b,{c,d}}}", ["a", "b", "c", "d"]),
        ("{,x}", ["", "x"]),
        ("plain.tar", ["plain.tar"]),
        ("{single}", ["{single}"]),
        ("}{", ["}{"]),  # the depth ends at zero: braceexpand's rule, and webdataset's
        (r"open\{brace", ["open{brace"]),
        (r"close\}brace", ["close}brace"]),
        (r"esc\{0..1\}", ["esc{0..1}"]),
        (r"{a\,b,c}", ["a,b", "c"]),
        ("pipe:curl -s http://h/x-{00..01}.tar || true", ["pipe:curl -s http://h/x-00.tar || true",
                                                         "pipe:curl -s http://h/x-01.tar || true"]),
    ],
)
def test_braceexpand(pattern, expected):
    assert braceexpand(pattern) == expected


@pytest.mark.parametrize("pattern", ["open{brace", "close}brace", "photos-{0000..0002.tar"])
def test_unbalanced_braces_are_an_error(pattern):
    with pytest.raises(UnbalancedBracesError, match="unbalanced braces"):
        braceexpand(pattern)


def test_large_range_is_fast_and_complete():
    urls = braceexpand("d/s-{000000..099999}.tar")
    assert len(urls) == 100000 and urls[-1] == "d/s-099999.tar"


def test_expand_urls_forms():
    assert expand_urls("a-{0..1}.tar::b-{0..1}.tar") == ["a-0.tar", "a-1.tar", "b-0.tar", "b-1.tar"]
    assert expand_urls(["x-{0..1}.tar", pathlib.Path("y.tar")]) == ["x-{0..1}.tar", "y.tar"]  # lists: as given
    assert expand_urls(pathlib.Path("z.tar")) == ["z.tar"]
    with pytest.raises(ConfigError):
        expand_urls([1, 2])
    with pytest.raises(ConfigError):
        expand_urls(3)


def test_simple_shard_list():
    shards = SimpleShardList("s-{0..3}.tar")
    assert len(shards) == 4 and [x["url"] for x in shards] == [f"s-{i}.tar" for i in range(4)]
    with pytest.raises(ConfigError):
        SimpleShardList([])


def test_simple_shard_list_seed_shuffles_per_epoch_identically_in_all_workers():
    shards = SimpleShardList("s-{00..19}.tar", seed=7)

    def order(epoch, worker):
        ctx = Context(epoch=epoch, placement=Placement(worker=worker, num_workers=2))
        return [x["url"] for x in shards.iterate(ctx)]

    assert order(0, 0) == order(0, 1) != order(1, 0)
    assert sorted(order(0, 0)) == shards.urls


def test_resampled_shards_differ_per_worker_and_epoch_and_are_reproducible():
    shards = ResampledShards("s-{00..19}.tar", nshards=30)

    def draws(epoch, worker, seed=0):
        ctx = Context(seed=seed, epoch=epoch, placement=Placement(worker=worker, num_workers=2))
        return [x["url"] for x in shards.iterate(ctx)]

    assert len(draws(0, 0)) == 30 and set(draws(0, 0)) <= set(shards.urls)
    assert draws(0, 0) == draws(0, 0)
    assert draws(0, 0) != draws(0, 1) and draws(0, 0) != draws(1, 0) and draws(0, 0) != draws(0, 0, seed=1)
    assert len(set(draws(0, 0))) > 5  # with replacement, but not stuck on one shard
