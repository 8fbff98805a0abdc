"""The Dask engine on real Dask components: a ``dask scheduler`` and two ``dask worker`` processes started as
separate processes on loopback (the real deployment), and a ``LocalCluster``. A worker killed mid-task: Dask
reruns the task elsewhere and the outputs are byte-identical to an undisturbed run."""

from __future__ import annotations

import os
import pathlib
import time

import pytest
from jobfns import Once, tag_pid, upper
from process_helpers import HERE, tree_bytes

from dask_servers import dask_cluster
from shardstream.process import DaskEngine, ShardSource, map_dataset

distributed = pytest.importorskip("distributed", reason="dask is not installed: pip install 'shardstream[dask]'")




@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """``dask scheduler`` + two ``dask worker`` processes (one thread each, with their nanny) on 127.0.0.1."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with dask_cluster(tmp_path_factory.mktemp("dask-logs"), env) as found:
        yield found


def test_separate_scheduler_and_workers_give_the_inline_bytes(scheduler, shards, tmp_path):
    address, _ = scheduler
    result = map_dataset(shards, str(tmp_path / "dask"), upper, scheduler=address, maxcount=10, progress=False)
    assert result.samples == 100 and len(result.urls) == 12 and result.index
    map_dataset(shards, str(tmp_path / "inline"), upper, engine="inline", maxcount=10)
    assert tree_bytes(str(tmp_path / "dask")) == tree_bytes(str(tmp_path / "inline"))


def test_tasks_run_on_both_workers(scheduler, shards, tmp_path):
    address, client = scheduler
    result = map_dataset(shards, str(tmp_path / "out"), tag_pid, scheduler=address)
    pids = {int(s["pid.txt"]) for url in result.urls for s in ShardSource(url).samples()}
    assert pids == set(client.run(os.getpid).values()) and len(pids) == 2


def test_a_worker_killed_mid_task_is_retried_and_outputs_stay_exact(scheduler, shards, tmp_path):
    _address, client = scheduler
    marker = tmp_path / "killed"
    fn = Once(str(marker), key="s00040", what="kill", slow=0.005)  # SIGKILLs the worker running task 1
    result = map_dataset(shards, str(tmp_path / "out"), fn, engine=DaskEngine(client=client), maxcount=10)
    killed_pid = int(marker.read_text())
    assert result.samples == 100 and result.tasks == 4
    assert not any(p.name.endswith(".tmp") for p in pathlib.Path(tmp_path / "out").iterdir())
    map_dataset(shards, str(tmp_path / "clean"), upper, engine="inline", maxcount=10)
    assert tree_bytes(str(tmp_path / "out")) == tree_bytes(str(tmp_path / "clean"))
    client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker
    pids = set(client.run(os.getpid).values())
    assert killed_pid not in pids and len(pids) == 2


def test_local_cluster_engine(shards, tmp_path):
    start = time.monotonic()
    result = map_dataset(shards, str(tmp_path / "out"), upper, engine="dask", workers=2, progress=False)
    assert result.samples == 100 and result.reused == 0
    again = map_dataset(shards, str(tmp_path / "out"), upper, engine="dask", workers=2)
    assert again.reused == 4  # all complete: no cluster is even started
    assert time.monotonic() - start >= 0
