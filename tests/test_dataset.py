"""WebDataset: webdataset 1.0.2's constructor and fluid methods over local shards."""

from __future__ import annotations

import io
import tarfile
import warnings

import pytest

import shardstream as wds
from shardstream.errors import ConfigError, WorkerSplitError
from shardstream import runtime as placement
from shardstream.config import Settings
from shardstream.testing import write_shards


def write_tar(path, members):  # raw member names (a.v1.skip, a lone a.txt) and an empty archive: not write_shards
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.fixture
def shards(tmp_path):
    """8 shards x 4 samples: keys k{shard}{i}, fields txt and cls."""
    number = lambda shard, index, n: str(n)  # noqa: E731
    write_shards(tmp_path, [4] * 8, {"txt": number, "cls": number}, name="d-{shard:03d}.tar", key="k{shard}{index}")
    return str(tmp_path / "d-{000..007}.tar")


def keys(ds):
    return [s["__key__"] for s in ds]


def test_reads_everything_once_in_order_without_shuffling(shards):
    ds = wds.WebDataset(shards, shardshuffle=False)
    assert keys(ds) == [f"k{n}{i}" for n in range(8) for i in range(4)]


def test_is_an_iterable_dataset_with_torch():
    torch = pytest.importorskip("torch")
    assert isinstance(wds.WebDataset("x-{0..1}.tar"), torch.utils.data.IterableDataset)
    assert isinstance(wds.DataPipeline(range(2)), torch.utils.data.IterableDataset)


def test_shard_shuffle_changes_every_epoch_and_is_reproducible(shards):
    ds = wds.WebDataset(shards, shardshuffle=True, seed=3)
    orders = []
    for epoch in (0, 1, 0):
        ds.set_epoch(epoch)
        orders.append(keys(ds))
    assert orders[0] == orders[2] != orders[1]
    assert sorted(orders[0]) == sorted(orders[1])
    assert keys(wds.WebDataset(shards, shardshuffle=True, seed=4)) != orders[0]
    # without set_epoch, each pass over the same object is the next epoch
    fresh = wds.WebDataset(shards, shardshuffle=True, seed=3)
    assert [keys(fresh), keys(fresh)] == orders[:2]


def test_fluid_chain_as_in_the_readme(shards):
    ds = wds.WebDataset(shards, shardshuffle=100).shuffle(10).decode().to_tuple("txt", "cls").map_tuple(str, int)
    pairs = list(ds)
    assert len(pairs) == 32 and sorted(c for _, c in pairs) == list(range(32))
    batches = list(ds.batched(5))
    assert [len(b[1]) for b in batches] == [5] * 6 + [2]


def test_fluid_methods_do_not_modify_the_dataset(shards):
    ds = wds.WebDataset(shards)
    mapped = ds.map(lambda s: s["__key__"])
    assert isinstance(next(iter(ds)), dict) and isinstance(next(iter(mapped)), str)


def test_resampled_with_epoch(shards):
    ds = wds.WebDataset(shards, resampled=True, seed=1).with_epoch(50)
    first = keys(ds)
    assert len(first) == 50 and len(set(first)) < 50  # drawn with replacement
    ds.set_epoch(0)
    assert keys(ds) == first


def test_repeat_true_streams_forever(shards):
    ds = wds.WebDataset(shards, repeat=True, shardshuffle=True).with_epoch(70)
    out = keys(ds)
    assert len(out) == 70 and sorted(out[:32]) == sorted(out[32:64])


def test_select_rename_files_and_keys(tmp_path):
    url = write_tar(tmp_path / "m.tar", [("a.v1.txt", b"x"), ("a.v1.cls", b"1"), ("a.v1.skip", b"")])
    ds = wds.WebDataset(url, select_files=lambda n: not n.endswith(".skip"), keys="last-dot")
    assert [sorted(s) for s in ds] == [["__key__", "__local_path__", "__url__", "cls", "txt"]]  # as webdataset
    ds = wds.WebDataset(url, rename_files=lambda n: n.replace("a.v1", "b"))
    assert keys(ds) == ["b"]


def test_handler_skips_bad_shards_and_names_them(shards, tmp_path):
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"this is not a tar file at all" * 40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = keys(wds.WebDataset([str(bad), shards.replace("{000..007}", "000")], handler=wds.warn_and_continue))
    assert out == ["k00", "k01", "k02", "k03"]
    assert any(str(bad) in str(w.message) for w in caught)
    assert wds.handlers.warn_and_continue is wds.warn_and_continue


def test_empty_check(tmp_path):
    empty = write_tar(tmp_path / "empty.tar", [])
    with pytest.raises(WorkerSplitError, match="no samples"):
        list(wds.WebDataset(empty))
    assert list(wds.WebDataset(empty, empty_check=False)) == []


def test_ranks_share_the_epoch_shuffle_and_split_exactly(shards, monkeypatch):
    for epoch in range(2):
        seen = []
        for rank in range(2):
            monkeypatch.setattr(placement, "get_settings", lambda rank=rank: Settings(rank=rank, world_size=2))
            ds = wds.WebDataset(shards, shardshuffle=True, seed=0)
            ds.set_epoch(epoch)
            seen.append(keys(ds))
        assert sorted(seen[0] + seen[1]) == sorted(f"k{n}{i}" for n in range(8) for i in range(4))


def test_custom_and_disabled_splitters(shards, monkeypatch):
    monkeypatch.setattr(placement, "get_settings", lambda: Settings(rank=1, world_size=2))
    every_other = lambda src: (x for i, x in enumerate(src) if i % 2 == 1)  # noqa: E731
    assert len(keys(wds.WebDataset(shards, nodesplitter=every_other, shardshuffle=True))) == 16
    assert len(keys(wds.WebDataset(shards, nodesplitter=None))) == 32
    with pytest.raises(ConfigError, match="split_by_node"):
        list(wds.WebDataset(shards, nodesplitter=wds.single_node_only))


def test_too_few_shards_for_the_ranks(tmp_path, monkeypatch):
    url = write_tar(tmp_path / "one.tar", [("a.txt", b"x")])
    monkeypatch.setattr(placement, "get_settings", lambda: Settings(rank=1, world_size=2))
    with pytest.raises(WorkerSplitError, match="rank 1 of 2 received no shard"):
        list(wds.WebDataset(url))


def test_unsupported_arguments_are_clear(shards, tmp_path):
    with pytest.raises(ConfigError, match="specification"):
        wds.WebDataset("spec.yaml")
    assert keys(wds.WebDataset(shards, cache_dir=str(tmp_path / "cache"), cache_size=10**9))[:1] == ["k00"]
    assert not (tmp_path / "cache").exists()  # local shards are read in place


def test_source_objects_as_urls(shards):
    ds = wds.WebDataset(wds.SimpleShardList(shards), shardshuffle=False)
    assert len(keys(ds)) == 32
    with pytest.raises(ConfigError):
        wds.WebDataset(wds.SimpleShardList(shards), resampled=True)


WEBDATASET_NAMES = """
    DataPipeline FluidWrapper Processor ResampledShards ShardWriter SimpleShardList TarWriter WebDataset WebLoader
    Decoder handle_extension imagehandler torch_video torch_audio numpy_dumps torch_dumps gopen
    batched decode default_collation_fn detshuffle extract_keys getfirst map map_dict map_tuple pipelinefilter
    rename rename_keys rsample select shuffle slice to_tuple unbatched with_epoch with_length
    ignore_and_continue ignore_and_stop reraise_exception warn_and_continue warn_and_stop
    single_node_only split_by_node split_by_worker tarfile_samples tarfile_to_samples url_opener
    tar_file_expander group_by_keys
""".split()


def test_webdataset_names_and_submodules_resolve():
    missing = [name for name in WEBDATASET_NAMES if not hasattr(wds, name)]
    assert not missing
    assert set(WEBDATASET_NAMES) <= set(dir(wds))
    assert wds.filters.map is wds.map and wds.filters.shuffle is wds.shuffle
    assert wds.shardlists.SimpleShardList is wds.SimpleShardList
    assert wds.tariterators.tarfile_to_samples is wds.tarfile_to_samples
    with pytest.raises(AttributeError):
        wds.no_such_name  # noqa: B018
