"""A real Dask cluster for the cluster tests: a ``dask scheduler`` and two ``dask worker`` processes (one thread each,
with their nannies, which restart a killed worker) on 127.0.0.1, started once for the session; and small shards."""

from __future__ import annotations

import pytest
from cluster_env import worker_env

import shardstream as wds
from dask_servers import dask_cluster

distributed = pytest.importorskip("distributed", reason="dask is not installed: pip install 'shardstream[dask]'")





class Cluster:
    """The running cluster: its address, a client, the worker addresses."""

    def __init__(self, address: str, client: object):
        self.address, self.client = address, client

    def workers(self) -> list[str]:
        return sorted(self.client.scheduler_info()["workers"])  # type: ignore[attr-defined]

    def keys(self, prefix: str = "shardstream-") -> list[str]:
        """The scheduler's task keys that start with ``prefix`` (asked to the scheduler itself)."""
        return self.client.run_on_scheduler(_keys, prefix)  # type: ignore[attr-defined]


def _keys(prefix, dask_scheduler=None):
    return sorted(str(k) for k in dask_scheduler.tasks if str(k).startswith(prefix))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    with dask_cluster(tmp_path_factory.mktemp("dask-logs"), worker_env()) as (address, client):
        yield Cluster(address, client)


@pytest.fixture(scope="session")
def shards(tmp_path_factory) -> list[str]:
    """Four shards of 25 samples (keys 000000..000099, fields cls and txt), written sorted by class."""
    folder = tmp_path_factory.mktemp("shards")
    with wds.ShardWriter(str(folder / "train-%06d.tar"), maxcount=25) as sink:
        for n in range(100):
            sink.write({"__key__": f"{n:06d}", "cls": n // 10, "txt": f"sample {n}"})
    return [str(folder / f"train-{n:06d}.tar") for n in range(4)]
