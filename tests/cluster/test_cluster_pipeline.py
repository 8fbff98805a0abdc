"""ClusterLoader over a fluid WebDataset, on the real scheduler and workers: slot ``k`` of ``M`` is DataLoader worker
``k`` of ``M``, so the batches are a DataLoader's with ``num_workers=M``; the state is the slots' pipeline states."""

from __future__ import annotations

import collections
import gc
import json
import os

import pytest
from clusterfns import FailOn, KillOnce

import shardstream as wds
from shardstream.cluster import ClusterLoader
from shardstream.errors import StateError

torch = pytest.importorskip("torch")


def pipeline(shards, fn=None):
    ds = wds.WebDataset(shards, shardshuffle=True, seed=5).shuffle(10)
    if fn is not None:
        ds = ds.map(fn, handler=wds.ignore_and_continue)  # the pipeline's own handler skips a bad sample
    ds = ds.decode().to_tuple("__key__", "cls").batched(4)
    ds.set_epoch(1)
    return ds


def keys(batches):
    return [list(batch[0]) for batch in batches]


@pytest.fixture(scope="module")
def five(shards, tmp_path_factory):
    """The four shards and a fifth, shorter one: the two slots end at different times."""
    folder = tmp_path_factory.mktemp("five")
    with wds.TarWriter(str(folder / "extra.tar")) as sink:
        for n in range(100, 111):
            sink.write({"__key__": f"{n:06d}", "cls": n // 10, "txt": f"sample {n}"})
    return [*shards, str(folder / "extra.tar")]


def dataloader(ds):
    return keys(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork"))


def test_slots_give_a_dataloaders_batches(cluster, five):
    expected = dataloader(pipeline(five))
    with ClusterLoader(pipeline(five), cluster.client, slots=2, in_flight=4, batches_per_task=2) as loader:
        loader.set_epoch(1)
        got = []
        for batch in loader:
            got.append(list(batch[0]))
            assert loader.in_flight_batches <= 4
        assert got == expected
        placed = loader.placements  # each task says where it ran: a slot's next task is asked to run there
        assert placed and {worker for _, worker in placed} <= set(cluster.workers())
        assert {shards for shards, _ in placed} == {None}  # a pipeline's shards are chosen inside its slots
    served = sorted(key for batch in expected for key in batch)
    assert served == [f"{n:06d}" for n in range(111)]


@pytest.mark.parametrize("stop", [1, 7, 26])
def test_resume_continues_exactly(cluster, five, stop):
    expected = dataloader(pipeline(five))
    with ClusterLoader(pipeline(five), cluster.client, slots=2, in_flight=6, batches_per_task=3) as loader:
        loader.set_epoch(1)
        it = iter(loader)
        head = [list(next(it)[0]) for _ in range(stop)]
        del it  # dropped without close(): its tasks are cancelled, the loader keeps its position
        gc.collect()
        state = json.loads(json.dumps(loader.state_dict()))  # plain data
    assert head == expected[:stop]
    with ClusterLoader(pipeline(five), cluster.client, slots=2, in_flight=4, batches_per_task=1,
                       workers=cluster.workers()[:1]) as again:
        again.load_state_dict(state)
        assert keys(again) == expected[stop:]


def test_a_data_error_follows_the_pipelines_handler(cluster, shards, tmp_path):
    log = tmp_path / "raised"
    with ClusterLoader(pipeline(shards, FailOn(str(log), "000042")), cluster.client, slots=2, in_flight=4) as loader:
        loader.set_epoch(1)
        served = [key for batch in keys(loader) for key in batch]
    assert sorted(served) == [f"{n:06d}" for n in range(100) if n != 42]
    assert log.read_text() == "raised\n"


def test_a_state_of_other_slots_is_refused(cluster, shards):
    with ClusterLoader(pipeline(shards), cluster.client, slots=2, in_flight=4) as loader:
        state = loader.state_dict()
    with ClusterLoader(pipeline(shards), cluster.client, slots=4, in_flight=8) as other:
        with pytest.raises(StateError, match=r"saved with slots=2, this loader has slots=4.*ClusterLoader\(\.\.\., slots=2\)"):
            other.load_state_dict(state)


def test_a_worker_killed_mid_epoch_loses_and_repeats_nothing(cluster, five, tmp_path):
    marker = tmp_path / "killed"
    expected = dataloader(pipeline(five))
    with ClusterLoader(pipeline(five, KillOnce(str(marker), "000060")), cluster.client, slots=2) as loader:
        loader.set_epoch(1)
        got = keys(loader)
    assert got == expected
    served = collections.Counter(key for batch in got for key in batch)
    assert len(served) == 111 and set(served.values()) == {1}
    assert marker.exists()
    cluster.client.wait_for_workers(2, timeout=120)
    assert int(marker.read_text()) not in set(cluster.client.run(os.getpid).values())
