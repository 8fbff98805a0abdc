"""One rank of a two-"node" job under torch.distributed.run (gloo, CPU), launched by test_multinode.py.

``python multinode_main.py MODE OUT SHARDS``; the agent's environment names its node (``MULTINODE_NODE``: ``A`` or
``B``). Every rank writes its process id to ``OUT/pids/NODE.PID`` first: the test kills a node by its agent and
these (torchrun starts each rank in a session of its own). Every step is a collective, as DDP's are: a rank with
fewer batches than the others would make the job fail.

- ``exact``: SHARDS is a base URL; the ranks read ``BASE/t/train-{0000..0007}.tar`` with a TrainingLoader and
  ``BASE/w/...`` with a WebLoader (the documented multi-node settings: shards split between ranks, then workers),
  two epochs each, through one shard cache per node (``OUT/cache-NODE/t`` and ``.../w``); each rank writes the keys
  it was served, per loader and epoch, to ``OUT/rankR.json``.
- ``elastic``: SHARDS is a brace pattern of local shards; a TrainingLoader in batches of 2. Rank 0 writes a
  checkpoint (the loader's state and every key consumed so far, by all ranks) every 2 steps, atomically, to
  ``OUT/checkpoint.json``. In the first attempt (``TORCHELASTIC_RESTART_COUNT=0``) the job waits for both nodes
  (world size 4; a round with one node only waits for its agent to restart it when the other node joins), and the
  ranks of node B stop after step 3 and wait to be killed with their node. The restarted ranks (world size 2)
  resume from the checkpoint and finish the epoch; rank 0 writes ``OUT/final.json``.
"""

from __future__ import annotations

import datetime
import faulthandler
import json
import os
import sys
import threading

import torch
import torch.distributed as dist

import shardstream as wds
from shardstream.training import TrainingDataset, TrainingLoader

PATTERN = "train-{0000..0007}.tar"
WAIT = 120  # seconds: the longest a rank waits for what the test does (a kill, another node), or runs; then it fails
BEFORE_THE_KILL = 3  # the steps node B's ranks take in the first attempt


def _key(sample: dict) -> str:
    return sample["__key__"]


def _gather(keys: list[str]) -> list[str]:
    """Every rank's keys of this step, in rank order: one collective per step, as a DDP step is."""
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, keys)
    return [key for rank_keys in everyone for key in rank_keys]


def _write(path: str, value: dict) -> None:
    """Write ``value`` as JSON atomically: the test, or a restarted rank, never reads half a file."""
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


def exact(out: str, base: str, node: str) -> None:
    """Cases 1 and 3: both loaders, two epochs, over HTTP through one shard cache per node."""
    rank = dist.get_rank()
    cache = os.path.join(out, f"cache-{node}")
    served: dict = {"node": node, "training": [], "web": [], "steps": {"training": [], "web": []}}
    loader = TrainingLoader(TrainingDataset(f"{base}/t/{PATTERN}", batch_size=4, seed=5,
                                            cache_dir=os.path.join(cache, "t")), num_workers=2)
    pipeline = wds.WebDataset(f"{base}/w/{PATTERN}", shardshuffle=True, seed=5,
                              cache_dir=os.path.join(cache, "w")).map(_key).batched(4)
    web = wds.WebLoader(pipeline, batch_size=None, num_workers=2)
    for name, batches_of in (("training", loader), ("web", web)):
        for epoch in range(2):
            batches_of.set_epoch(epoch)
            keys, steps = [], 0
            for batch in batches_of:
                batch_keys = list(batch["__key__"]) if isinstance(batch, dict) else list(batch)
                keys.extend(batch_keys)
                _gather(batch_keys)
                steps += 1
            served[name].append(keys)
            served["steps"][name].append(steps)
    dist.barrier()
    _write(os.path.join(out, f"rank{rank}.json"), served)


def _wait_forever(why: str) -> None:
    """Block until this process is killed (what the test does next); fail if that never comes."""
    threading.Event().wait(WAIT)
    sys.exit(f"waited {WAIT} s {why}")


def elastic(out: str, shards: str, node: str) -> None:
    """Case 2: checkpoints, a node killed mid-epoch, the survivors resume (see the module docstring)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if attempt == 0 and world < 4:
        _wait_forever("for the other node to join (the agent restarts this rank when it does)")
    path = os.path.join(out, "checkpoint.json")
    loader = TrainingLoader(TrainingDataset(shards, batch_size=2, seed=7), num_workers=1)
    consumed: list[str] = []
    if attempt > 0:
        with open(path) as f:
            checkpoint = json.load(f)
        loader.load_state_dict(checkpoint["state"])
        consumed = list(checkpoint["consumed"])
    resumed_from = len(consumed)
    for step, batch in enumerate(loader, 1):
        consumed.extend(_gather(list(batch["__key__"])))
        if step % 2 == 0 and rank == 0:
            _write(path, {"state": loader.state_dict(), "consumed": consumed, "world": world, "attempt": attempt})
        if attempt == 0 and node == "B" and step == BEFORE_THE_KILL:
            _wait_forever("to be killed with node B")
    dist.barrier()
    if rank == 0:
        _write(os.path.join(out, "final.json"), {"before": consumed[:resumed_from], "after": consumed[resumed_from:],
                                                 "world": world, "attempt": attempt})


def main(mode: str, out: str, shards: str) -> None:
    node = os.environ["MULTINODE_NODE"]
    os.makedirs(os.path.join(out, "pids"), exist_ok=True)
    open(os.path.join(out, "pids", f"{node}.{os.getpid()}"), "w").close()
    torch.set_num_threads(1)
    faulthandler.dump_traceback_later(WAIT, exit=True)  # a rank that hangs says where, and ends
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    (exact if mode == "exact" else elastic)(out, shards, node)
    dist.destroy_process_group()  # here, not at the interpreter's exit (docs/integrations.md, "Ending cleanly")


if __name__ == "__main__":
    main(*sys.argv[1:4])
