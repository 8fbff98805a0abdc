"""Joins of one shard set per modality: lockstep over equal boundaries, lookups through indexes, missing partners."""

from __future__ import annotations

import pytest

import shardstream as wds
from shardstream.errors import ConfigError, MissingPartnerError
from shardstream.indexed import IndexedDataset, index_dataset
from shardstream.join import Join, join_indexed, join_streams
from shardstream.testing import write_shards


@pytest.fixture
def sets(tmp_path):
    images = write_shards(tmp_path / "img", [4, 3, 5], {"jpg": lambda s, i, n: f"img{n}"})
    captions = write_shards(tmp_path / "cap", [4, 3, 5], {"txt": lambda s, i, n: f"cap{n}"})
    return images, captions


def keys(samples):
    return [s["__key__"] for s in samples]


@pytest.mark.parametrize("seed", [0, 1])
def test_lockstep_join_with_shuffled_shards(sets, seed):
    images, captions = sets
    joined = list(join_streams(wds.WebDataset(images, shardshuffle=3, seed=seed),
                               wds.WebDataset(captions, shardshuffle=3, seed=seed), names=["img", "cap"]))
    assert len(joined) == 12 and len(set(keys(joined))) == 12
    for s in joined:
        assert s["jpg"].replace(b"img", b"") == s["txt"].replace(b"cap", b"")
        assert s["__url_cap__"].replace("/cap/", "/img/") == s["__url__"]


def test_lockstep_join_tolerates_another_order_within_a_shard(tmp_path):
    write_shards(tmp_path, [3], {"jpg": "x"}, name="a.tar")
    write_shards(tmp_path, [3], {"txt": "y"}, name="b.tar", key="s0-{index:03d}")
    reordered = list(reversed(list(wds.WebDataset(str(tmp_path / "b.tar"), shardshuffle=False))))
    joined = list(join_streams(wds.WebDataset(str(tmp_path / "a.tar"), shardshuffle=False), reordered))
    assert keys(joined) == ["s0-000", "s0-001", "s0-002"] and all(s["txt"] == b"y" for s in joined)


def test_missing_partner_names_key_and_set(tmp_path):
    write_shards(tmp_path, [4], {"jpg": "x"}, name="a.tar")
    write_shards(tmp_path, [4], {"txt": "y"}, name="b.tar")
    partner = [s for s in wds.WebDataset(str(tmp_path / "b.tar"), shardshuffle=False) if s["__key__"] != "s0-002"]
    primary = wds.WebDataset(str(tmp_path / "a.tar"), shardshuffle=False)
    with pytest.raises(MissingPartnerError) as info:
        list(join_streams(primary, partner, names=["images", "captions"]))
    assert info.value.key == "s0-002" and "'captions'" in str(info.value)
    skipped = list(join_streams(primary, partner, handler=wds.ignore_and_continue))
    assert keys(skipped) == ["s0-000", "s0-001", "s0-003"]


def test_extra_partner_samples_are_reported(tmp_path):
    write_shards(tmp_path, [2], {"jpg": "x"}, name="a.tar")
    write_shards(tmp_path, [3], {"txt": "y"}, name="b.tar")
    with pytest.raises(MissingPartnerError, match="have no sample in"):
        list(join_streams(wds.WebDataset(str(tmp_path / "a.tar")), wds.WebDataset(str(tmp_path / "b.tar"))))


def test_read_ahead_is_bounded(tmp_path):
    write_shards(tmp_path, [30], {"jpg": "x"}, name="a.tar")
    write_shards(tmp_path, [30], {"txt": "y"}, name="b.tar", key="t{index}")
    with pytest.raises(MissingPartnerError, match="read ahead"):
        list(join_streams(wds.WebDataset(str(tmp_path / "a.tar")), wds.WebDataset(str(tmp_path / "b.tar")),
                          max_pending=10))


def test_same_field_in_two_sets_is_an_error(sets):
    images, _ = sets
    with pytest.raises(ConfigError, match="in both"):
        next(iter(join_streams(wds.WebDataset(images, shardshuffle=False),
                               wds.WebDataset(images, shardshuffle=False))))


def test_indexed_join_with_other_boundaries(tmp_path, sets):
    images, _ = sets
    captions = write_shards(tmp_path / "cap2", [7, 5], {"txt": lambda s, i, n: f"cap{n}"},
                            key="{number}")  # other shard boundaries, other keys
    renumbered = [dict(s, __key__=str(int(s["jpg"][3:]))) for s in wds.WebDataset(images, shardshuffle=True)]
    index_dataset(captions, str(tmp_path / "cap.json"))
    joined = list(join_indexed(renumbered, IndexedDataset(str(tmp_path / "cap.json")), names=["img", "cap"]))
    assert len(joined) == 12 and all(s["jpg"][3:] == s["txt"][3:] for s in joined)
    with pytest.raises(MissingPartnerError, match="'cap'"):
        list(join_indexed([{"__key__": "nope"}], IndexedDataset(str(tmp_path / "cap.json")), names=["img", "cap"]))


def make_reordered(tmp_path):
    """a.tar: s0-000..s0-009; b.tar: the same keys, pairs swapped (s0-001, s0-000, s0-003, s0-002, ...)."""
    write_shards(tmp_path, [10], {"jpg": lambda s, i, n: f"img{n}"}, name="a.tar")
    swapped = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8]
    write_shards(tmp_path, [10], lambda s, i, n: {"__key__": f"s0-{swapped[i]:03d}", "txt": f"cap{swapped[i]}"},
                 name="b.tar")
    return str(tmp_path / "a.tar"), str(tmp_path / "b.tar")


@pytest.mark.parametrize("stop", [0, 1, 2, 3, 6, 9, 10])
def test_join_pipeline_resumes_with_samples_held_ahead(tmp_path, stop):
    from shardstream.join import Join

    a, b = make_reordered(tmp_path)

    def make():
        return Join([wds.WebDataset(a), wds.WebDataset(b)], names=["img", "cap"]).shuffle(3, seed=2)

    joined = make()
    it = iter(joined)
    head = [next(it) for _ in range(stop)]
    state = joined.state_dict()
    rest = [(s["__key__"], s["jpg"], s["txt"]) for s in it]
    again = make()
    again.load_state_dict(state)
    assert [(s["__key__"], s["jpg"], s["txt"]) for s in again] == rest
    assert len(head) + len(rest) == 10 and all(j[3:] == t[3:] for _, j, t in rest)


def test_join_pipeline_has_the_fluid_methods_and_epochs(sets):
    from shardstream.join import Join

    images, captions = sets

    def make():
        return Join([wds.WebDataset(images, shardshuffle=3, seed=1), wds.WebDataset(captions, shardshuffle=3, seed=1)])

    joined = make().shuffle(5).batched(4, collation_fn=None)
    joined.set_epoch(0)
    first = [s["__key__"] for batch in joined for s in batch]
    joined.set_epoch(1)
    second = [s["__key__"] for batch in joined for s in batch]
    assert sorted(first) == sorted(second) and len(first) == 12 and first != second


@pytest.mark.parametrize("lockstep", ["join_streams", "Join"])
def test_a_key_only_a_partner_has_is_reported_after_the_joined_samples(tmp_path, lockstep):
    """As documented (module docstring, docs/specs.md): a partner's sample without a primary sample is a
    MissingPartnerError once the primary ends, after every joined sample; a skipping handler ignores it."""
    write_shards(tmp_path, [2], {"jpg": "x"}, name="a.tar")
    write_shards(tmp_path, [3], {"txt": "y"}, name="b.tar")

    def joined(**kw):
        sets = [wds.WebDataset(str(tmp_path / n), shardshuffle=False) for n in ("a.tar", "b.tar")]
        if lockstep == "Join":
            return iter(Join(sets, names=["images", "captions"], **kw))
        return join_streams(*sets, names=["images", "captions"], **kw)

    it, seen = joined(), []
    with pytest.raises(MissingPartnerError) as info:
        seen.extend(s["__key__"] for s in it)
    assert seen == ["s0-000", "s0-001"] and info.value.key == "s0-002"
    assert "1 sample(s) of 'captions' have no sample in 'images' (first: 's0-002')" in str(info.value)
    assert keys(joined(handler=wds.ignore_and_continue)) == ["s0-000", "s0-001"]
