"""Two trainer ranks under ``torch.distributed.run`` (gloo, CPU) fed by the real cluster: exact epochs, equal batch
counts, the batches of TrainingLoader on each rank, and one state for both ranks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cluster_env import HERE, worker_env

from shardstream.training import TrainingDataset, TrainingLoader

pytest.importorskip("torch")


@pytest.mark.timeout(300)
def test_two_ranks_get_exact_epochs_and_training_loaders_batches(cluster, shards, tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               str(HERE / "ranks_main.py"), cluster.address, str(tmp_path), *shards]
    run = subprocess.run(command, cwd=tmp_path, env=worker_env(), capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["steps"] == ranks[1]["steps"] == 9  # 100 samples: 50 per rank, batches of 6
    served = [key for rank in ranks for batch in rank["keys"] for key in batch]
    assert sorted(served) == [f"{n:06d}" for n in range(100)]
    assert ranks[0]["state"] == ranks[1]["state"]  # any rank's checkpoint restores every rank
    for r, rank in enumerate(ranks):
        local = TrainingLoader(TrainingDataset(shards, batch_size=6, seed=9, decode=True, rank=r, world_size=2))
        assert rank["keys"] == [list(batch["__key__"]) for batch in local]
