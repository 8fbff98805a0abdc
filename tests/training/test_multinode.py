"""Training across nodes: two torchrun agents on 127.0.0.1 as two "nodes" (c10d rendezvous), two ranks each,
gloo on CPU; the ranks are tests/training/multinode_main.py and write what they were served to files read here.

- every sample exactly once per epoch across the 4 ranks, equal batches, with TrainingLoader and with WebLoader;
- one shard cache per node: each shard downloaded once per node that reads it (counted at the HTTP server);
- elastic (``--nnodes 1:2``): node B dies mid-epoch (its agent and its ranks killed), node A's agent restarts its
  ranks (world size 2), which resume from the last checkpoint: over the epoch, no sample lost and none repeated.

The agents' rendezvous store is hosted by node A (``is_host``), so killing B leaves the store alive; the agents
run with ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (without it, torch 2.13's agent that held rank 0 hands the
restarted ranks its store of the previous attempt, and they hang in ``init_process_group``: docs/training.md,
"Several nodes"). A test that can hang has a timeout, and every process it started (agents, ranks and their
DataLoader workers) is killed in a ``finally``.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
from training_data import write_dataset

dist = pytest.importorskip("torch.distributed")
pytestmark = [
    pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch without gloo"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the test finds the ranks in /proc (Linux)"),
]

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "io"))
from fault_servers import StubHTTP  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHARDS, PER_SHARD = 8, 8  # the script reads train-{0000..0007}.tar
EVERYTHING = sorted(f"s{n:05d}" for n in range(SHARDS * PER_SHARD))
#: the rendezvous settings: a dead node's heartbeat expires after 2 x 3 s, a round with fewer nodes than the most
#: closes 1 s after the least have joined (so a lone survivor re-forms the job quickly)
RDZV = "keep_alive_interval=2,keep_alive_max_attempt=3,last_call_timeout=1,join_timeout=120"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_rank(pid: int) -> bool:
    """Whether ``pid`` is a rank of these tests (started by an agent, running multinode_main.py)."""
    try:
        return b"multinode_main.py" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class Nodes:
    """The agents of one job (one per node), their logs, and every process they started."""

    def __init__(self, out: pathlib.Path, mode: str, shards: str, nnodes: str, max_restarts: int):
        self.out, self.agents, self.logs = out, {}, {}
        port, run_id = _free_port(), uuid.uuid4().hex[:12]
        path = os.pathsep.join([str(ROOT / "src"), *(os.path.abspath(p) for p in
                                                     os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)])
        for node, host in (("A", 1), ("B", 0)):
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", nnodes, "--nproc-per-node", "2",
                       "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
                       "--rdzv-conf", f"{RDZV},is_host={host}", "--local-addr", "127.0.0.1",
                       "--max-restarts", str(max_restarts), "--monitor-interval", "0.2",
                       str(HERE / "multinode_main.py"), mode, str(out), shards]
            env = dict(os.environ, MULTINODE_NODE=node, PYTHONPATH=path, OMP_NUM_THREADS="1",
                       PYTHONWARNINGS="ignore", LOGLEVEL="INFO", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
            self.logs[node] = open(out / f"agent-{node}.log", "w")  # noqa: SIM115 - closed in close()
            self.agents[node] = subprocess.Popen(command, cwd=out, env=env, stdout=self.logs[node],
                                                 stderr=subprocess.STDOUT, start_new_session=True)

    def ranks(self, node: str) -> list[int]:
        """The process ids of the ranks node ``node``'s agent started (each leads a process group of its own)."""
        return [int(p.name.split(".")[1]) for p in (self.out / "pids").glob(f"{node}.*")]

    def kill(self, node: str) -> None:
        """The node dies: its agent first (it would restart its ranks), then its ranks and their workers (only
        processes of this job: a process id of a rank that ended may belong to another process by now)."""
        agent = self.agents[node]
        groups = [agent.pid] if agent.poll() is None else []
        for group in groups + [pid for pid in self.ranks(node) if _is_rank(pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        agent.wait()

    def wait_for(self, done, what: str, timeout: float = 150) -> None:
        """Wait until ``done()`` (a file the ranks write), failing with the agents' logs when it takes longer than
        ``timeout`` seconds or when every agent has exited."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline or all(a.poll() is not None for a in self.agents.values()):
                pytest.fail(f"{what}: not done after {timeout} s\n{self.report()}")
            time.sleep(0.1)

    def exit_codes(self, timeout: float = 150) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        for node, agent in self.agents.items():
            try:
                agent.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"agent {node} still runs after {timeout} s\n{self.report()}")
        return {node: agent.returncode for node, agent in self.agents.items()}

    def report(self) -> str:
        for log in self.logs.values():
            log.flush()
        return "\n".join(f"--- agent {node}:\n{(self.out / f'agent-{node}.log').read_text()[-4000:]}"
                         for node in self.agents)

    def close(self) -> None:
        for node in self.agents:
            self.kill(node)
        for log in self.logs.values():
            log.close()


@contextlib.contextmanager
def two_nodes(out: pathlib.Path, mode: str, shards: str, *, nnodes: str = "2", max_restarts: int = 0):
    nodes = Nodes(out, mode, shards, nnodes, max_restarts)
    try:
        yield nodes
    finally:
        nodes.close()


@pytest.fixture(scope="module")
def shard_files(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("multinode"), [PER_SHARD] * SHARDS)


@pytest.fixture(scope="module")
def exact_run(shard_files, tmp_path_factory):
    """One 2-node job (both loaders, 2 epochs each) over a counting HTTP server; its ranks' files and the server."""
    files = {}
    for path in shard_files:
        data = pathlib.Path(path).read_bytes()
        files[f"t/{pathlib.Path(path).name}"] = files[f"w/{pathlib.Path(path).name}"] = data
    server = StubHTTP(files)
    out = tmp_path_factory.mktemp("exact")
    try:
        with two_nodes(out, "exact", server.url().rstrip("/")) as nodes:
            codes = nodes.exit_codes(timeout=240)
            assert codes == {"A": 0, "B": 0}, nodes.report()
        yield [json.loads((out / f"rank{r}.json").read_text()) for r in range(4)], server
    finally:
        server.stop()


def _shard_of(key: str) -> int:
    return int(key[1:]) // PER_SHARD


@pytest.mark.timeout(300)
@pytest.mark.parametrize("loader", ["training", "web"])
def test_every_sample_once_per_epoch_on_four_ranks_of_two_nodes(exact_run, loader):
    ranks, _ = exact_run
    assert sorted(rank["node"] for rank in ranks) == ["A", "A", "B", "B"]
    for epoch in range(2):
        served = [rank[loader][epoch] for rank in ranks]
        assert sorted(key for keys in served for key in keys) == EVERYTHING, f"epoch {epoch}"
        assert len({rank["steps"][loader][epoch] for rank in ranks}) == 1  # equal batches on every rank
    assert ranks[0][loader][0] != ranks[0][loader][1]  # another epoch, another order


@pytest.mark.timeout(300)
def test_one_download_per_shard_per_node(exact_run):
    ranks, server = exact_run
    # the training loader's ranks index every shard (a global shuffle): each node downloads each shard once
    assert {n: server.full_gets(f"t/train-{n:04d}.tar") for n in range(SHARDS)} == dict.fromkeys(range(SHARDS), 2)
    # the web loader's ranks read their own shards: once per node whose ranks read it, over both epochs
    readers = collections.defaultdict(set)
    for rank in ranks:
        for key in (key for keys in rank["web"] for key in keys):
            readers[_shard_of(key)].add(rank["node"])
    assert {n: server.full_gets(f"w/train-{n:04d}.tar") for n in range(SHARDS)} == {
        n: len(readers[n]) for n in range(SHARDS)}


@pytest.mark.timeout(300)
def test_elastic_resume_after_a_node_dies(shard_files, tmp_path):
    pattern = str(pathlib.Path(shard_files[0]).parent / "train-{0000..0007}.tar")
    checkpoint, final = tmp_path / "checkpoint.json", tmp_path / "final.json"
    with two_nodes(tmp_path, "elastic", pattern, nnodes="1:2", max_restarts=1) as nodes:
        nodes.wait_for(checkpoint.exists, "the first checkpoint")
        first = json.loads(checkpoint.read_text())
        assert first["world"] == 4 and first["attempt"] == 0
        nodes.kill("B")
        assert nodes.exit_codes(timeout=200)["A"] == 0, nodes.report()
    result = json.loads(final.read_text())
    assert (result["world"], result["attempt"]) == (2, 1)  # node A's ranks alone, restarted once
    assert result["before"] == first["consumed"]  # they resumed from the checkpoint node B's death left
    assert 0 < len(result["before"]) < len(EVERYTHING)  # mid-epoch
    counts = collections.Counter(result["before"] + result["after"])
    assert sorted(counts) == EVERYTHING and set(counts.values()) == {1}  # none lost, none repeated
