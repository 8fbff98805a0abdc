"""ClusterLoader over a TrainingDataset, on a real scheduler and two worker processes: the batches and states of
TrainingLoader whatever the cluster does (one worker or two, a worker killed mid-epoch, a stop and a resume)."""

from __future__ import annotations

import collections
import functools
import gc
import http.server
import os
import threading
import time

import pytest
from clusterfns import FailOn, KillOnce, tag_pid

from shardstream.cluster import ClusterLoader
from shardstream.errors import ConfigError, StateError
from shardstream.io.cache import ShardCache
from shardstream.training import TrainingDataset, TrainingLoader

EVERYTHING = [f"{n:06d}" for n in range(100)]


def dataset(shards, **kw):
    kw.setdefault("batch_size", 8)
    return TrainingDataset(shards, seed=3, decode=True, **kw)


def keys(batches):
    return [list(batch["__key__"]) for batch in batches]


def local(shards, epoch=0, num_workers=0, **kw):
    loader = TrainingLoader(dataset(shards, **kw), num_workers=num_workers)
    loader.set_epoch(epoch)
    return keys(loader)


def wait_until_gone(cluster, prefix, deadline=60.0):
    """The scheduler's keys with ``prefix`` once it has none left (cancellation is a message: it is handled soon
    after, not at once), or the ones still there after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    left = cluster.keys(prefix)
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = cluster.keys(prefix)
    return left


@pytest.mark.parametrize("shuffle", ["global", "stream"])
def test_batches_are_training_loaders_with_one_or_two_workers(cluster, shards, shuffle):
    kw = {"shuffle": shuffle, "buffer": 16, "map": tag_pid}
    expected = local(shards, epoch=2, **kw)
    one, two = cluster.workers()[:1], None
    for workers in (one, two):
        with ClusterLoader(dataset(shards, **kw), cluster.client, workers=workers, in_flight=6) as loader:
            loader.set_epoch(2)
            batches = list(loader)
        assert keys(batches) == expected
        pids = {int(pid) for batch in batches for pid in batch["pid"]}
        # the tasks ran on the cluster (on the one worker asked for); how Dask spreads them over two is its choice
        allowed = set(cluster.client.run(os.getpid, workers=workers).values())
        assert pids <= allowed and (len(pids) == 1 or not workers) and os.getpid() not in pids
    assert sorted(sum(expected, [])) == EVERYTHING


def test_stream_slots_give_the_batches_of_that_many_dataloader_workers(cluster, shards):
    kw = {"shuffle": "stream", "buffer": 16}
    with ClusterLoader(dataset(shards, **kw), cluster.client, slots=2, in_flight=4) as loader:
        assert keys(loader) == local(shards, num_workers=2, **kw)


def test_a_worker_killed_mid_epoch_loses_and_repeats_nothing(cluster, shards, tmp_path):
    marker = tmp_path / "killed"
    before = set(cluster.client.run(os.getpid).values())
    expected = local(shards)
    with ClusterLoader(dataset(shards, map=KillOnce(str(marker), "000050")), cluster.client, in_flight=6) as loader:
        got = keys(loader)
    assert got == expected  # the same batches in the same order: nothing lost, nothing repeated
    served = collections.Counter(sum(got, []))
    assert sorted(served) == EVERYTHING and set(served.values()) == {1}
    killed = int(marker.read_text())
    assert killed in before
    cluster.client.wait_for_workers(2, timeout=120)  # the nanny started a new worker
    assert killed not in set(cluster.client.run(os.getpid).values())


@pytest.mark.parametrize("stop", [0, 1, 6, 12])
def test_resume_after_a_stop_continues_exactly(cluster, shards, stop):
    with ClusterLoader(dataset(shards), cluster.client, in_flight=4) as loader:
        loader.set_epoch(1)
        it = iter(loader)
        head = [list(next(it)["__key__"]) for _ in range(stop)]
        state = loader.state_dict()
    expected = local(shards, epoch=1)
    assert head == expected[:stop] and state["batches"] == stop
    # on one worker now: the cluster's size is not part of the state
    with ClusterLoader(dataset(shards), cluster.client, workers=cluster.workers()[1:]) as again:
        again.load_state_dict(state)
        assert len(again) == 13 - stop
        assert keys(again) == expected[stop:]
        assert again.epoch == 2
    # the state is TrainingLoader's: it restores there too
    restored = TrainingLoader(dataset(shards))
    restored.load_state_dict(state)
    assert keys(restored) == expected[stop:]


def test_a_training_loader_state_restores_on_the_cluster_with_other_ranks(cluster, shards):
    loader = TrainingLoader(dataset(shards, rank=0, world_size=2))
    it = iter(loader)
    head = [list(next(it)["__key__"]) for _ in range(3)]
    state = loader.state_dict()
    del it
    with ClusterLoader(dataset(shards, rank=0, world_size=1), cluster.client) as one_rank:
        one_rank.load_state_dict(state)
        rest = sum(keys(one_rank), [])
    other_head = sum(local(shards, rank=1, world_size=2)[:3], [])
    assert sorted(sum(head, []) + other_head + rest) == EVERYTHING


def test_a_stopped_trainer_leaves_no_task_on_the_scheduler(cluster, shards):
    loader = ClusterLoader(dataset(shards), cluster.client, in_flight=8, batches_per_task=1)
    it = iter(loader)
    next(it)
    assert cluster.keys("shardstream-batches-")  # tasks are submitted ahead
    loader.close()
    assert wait_until_gone(cluster, "shardstream-batches-") == []
    assert wait_until_gone(cluster, "shardstream-recipe-") == []


def test_a_pass_dropped_without_close_cancels_its_tasks_and_keeps_its_position(cluster, shards):
    expected = local(shards, epoch=1)
    with ClusterLoader(dataset(shards), cluster.client, in_flight=8, batches_per_task=1) as loader:
        loader.set_epoch(1)
        it = iter(loader)
        for n, _ in enumerate(it):
            if n == 2:
                break
        prefix = f"shardstream-batches-{it.feed.pass_id}-"
        assert cluster.keys(prefix)  # tasks submitted ahead, still wanted by the pass
        del it  # the trainer drops the pass without close()
        gc.collect()
        assert loader.in_flight_batches == 0
        assert wait_until_gone(cluster, prefix) == []
        state = loader.state_dict()
        assert state["epoch"] == 1 and state["batches"] == 3
        loader.load_state_dict(state)
        assert keys(loader) == expected[3:]


def test_in_flight_bounds_the_batches_held(cluster, shards):
    with ClusterLoader(dataset(shards), cluster.client, in_flight=4, batches_per_task=2) as loader:
        seen = []
        for batch in loader:
            seen.append(len(batch["__key__"]))
            tasks = loader._pass().feed.futures()  # the tasks submitted and not received (Dask releases lazily)
            assert loader.in_flight_batches <= 4 and len(tasks) <= 2
        assert len(seen) == 13 and loader.in_flight_batches == 0


def test_a_data_error_is_raised_in_the_trainer_and_not_retried(cluster, shards, tmp_path):
    log = tmp_path / "raised"
    expected = local(shards)
    bad = next(j for j, batch in enumerate(expected) if "000042" in batch)
    with ClusterLoader(dataset(shards, map=FailOn(str(log), "000042")), cluster.client, in_flight=4,
                       batches_per_task=1) as loader:
        it = iter(loader)
        assert [list(next(it)["__key__"]) for _ in range(bad)] == expected[:bad]
        with pytest.raises(ValueError, match="bad sample 000042"):
            next(it)
    assert log.read_text() == "raised\n"  # the task ran once: Dask did not retry it


def test_the_placement_hint_names_the_shards_of_each_task(cluster, shards):
    asked = []
    first = cluster.workers()[0]

    def prefer(numbers):
        asked.append(numbers)
        return [first]

    ds = dataset(shards, shuffle="none", batch_size=25)  # in order: batch j is shard j
    with ClusterLoader(ds, cluster.client, prefer=prefer, batches_per_task=1, in_flight=4) as loader:
        assert keys(loader) == [EVERYTHING[25 * j: 25 * j + 25] for j in range(4)]
    assert asked == [[0], [1], [2], [3]]
    asked.clear()  # streaming: a block of 25 samples reads one group of one shard
    ds = dataset(shards, shuffle="stream", window=1, buffer=25, batch_size=25)
    with ClusterLoader(ds, cluster.client, prefer=prefer, batches_per_task=1, in_flight=4) as loader:
        got = keys(loader)
    assert [EVERYTHING.index(batch[0]) // 25 for batch in got] == [shard for [shard] in asked]
    assert sorted(asked) == [[0], [1], [2], [3]]


class Counted(http.server.SimpleHTTPRequestHandler):
    """Serves a folder (whole files: ``Range`` is ignored) and counts the downloads (``gets``: path -> count, set
    per server): the GET requests from the object's first byte. The later parts a reader asks for blind with the
    first request to a server it has not seen (closed unread when the answer is the whole file) are no download."""

    gets: collections.Counter

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        if self.headers.get("Range", "bytes=0-").startswith("bytes=0-"):
            self.gets[self.path] += 1
        super().do_GET()


def test_tasks_run_where_the_workers_cache_holds_their_shards(cluster, shards, tmp_path):
    gets = collections.Counter()
    handler = type("Handler", (Counted,), {"gets": gets})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=os.path.dirname(shards[0])))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = [f"http://127.0.0.1:{server.server_address[1]}/{os.path.basename(s)}" for s in shards]
    a, b = cluster.workers()
    homes = cluster.client.run(os.getcwd)
    try:
        for worker in (a, b):  # each worker its own cache: a relative directory in a working directory of its own
            (tmp_path / worker.rsplit(":", 1)[1]).mkdir()
            cluster.client.run(os.chdir, str(tmp_path / worker.rsplit(":", 1)[1]), workers=[worker])
        cache, holder = ShardCache("shard-cache"), {0: a, 1: a, 2: b, 3: b}
        for shard, worker in holder.items():  # warm A with shards 0-1, B with 2-3
            cluster.client.run(cache.fetch, urls[shard], workers=[worker])
        assert sum(gets.values()) == 4
        kw = {"shuffle": "stream", "window": 1, "buffer": 25, "batch_size": 25}  # task j reads one shard
        ds = dataset(urls, lengths=[25] * 4, cache_dir="shard-cache", **kw)
        with ClusterLoader(ds, cluster.client, batches_per_task=1, in_flight=1) as loader:
            got = keys(loader)
            placed = loader.placements
        assert got == local(shards, **kw)  # placement changes no batch
        assert sorted(shard for read, _ in placed for shard in read) == [0, 1, 2, 3]
        assert [worker for _, worker in placed] == [holder[read[0]] for read, _ in placed]
        assert sum(gets.values()) == 4  # no download: every task read its worker's cached shard
    finally:
        for worker, home in homes.items():
            cluster.client.run(os.chdir, home, workers=[worker])
        server.shutdown()
        server.server_close()


def test_settings_are_checked(cluster, shards):
    with pytest.raises(ConfigError, match="in_flight=2 cannot hold one task per slot"):
        ClusterLoader(dataset(shards, shuffle="stream"), cluster.client, slots=2, batches_per_task=2, in_flight=2)
    with pytest.raises(ConfigError, match="slots applies to shuffle='stream'"):
        ClusterLoader(dataset(shards), cluster.client, slots=2)
    with pytest.raises(ConfigError, match="not both"):
        ClusterLoader(dataset(shards), cluster.client, prefer=lambda s: None, workers=[])
    with ClusterLoader(dataset(shards), cluster.client) as loader:
        with pytest.raises(StateError, match="seed=3"):
            loader.load_state_dict(TrainingLoader(TrainingDataset(shards, batch_size=8, seed=4)).state_dict())
