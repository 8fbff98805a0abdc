"""Real processes: 2 ranks (torch.distributed, gloo) x 2 DataLoader workers, on 2 shards (fewer shards than
ranks x workers). Every rank takes a collective step per batch, as DDP does: unequal batch counts would hang."""

from __future__ import annotations

import collections
import datetime
import json
import os
import socket

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from shardstream.training import TrainingDataset, TrainingLoader  # noqa: E402

MODES = ("global", "stream")


def _dataset(shards, shuffle, **kw):
    return TrainingDataset(shards, batch_size=3, shuffle=shuffle, buffer=8, collate=None, seed=11, **kw)


def _keep(batch):
    return batch  # a module-level function: the ranks' DataLoader workers may be spawned (pickled arguments)


def _rank_main(rank: int, world: int, port: int, shards: list[str], out: str) -> None:
    """One rank: a TrainingLoader with 2 workers per mode, an all_reduce per batch, a state after 2 batches."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    results = {}
    for shuffle, start in zip(MODES, ("spawn", "fork")):  # spawned workers learn their rank from the loader
        loader = TrainingLoader(_dataset(shards, shuffle), num_workers=2, collate_fn=_keep,
                                multiprocessing_context=start)
        keys, steps, state = [], 0, None
        for batch in loader:
            keys.extend(sample["__key__"] for sample in batch)
            step = torch.ones(1)
            dist.all_reduce(step)  # hangs (then times out) if a rank ran out of batches
            steps += 1
            if steps == 2:
                state = loader.state_dict()
        results[shuffle] = {"keys": keys, "steps": steps, "state": state, "len": len(loader)}
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_two_ranks_two_workers_exact_epochs_and_elastic_resume(two_shards, tmp_path):
    torch.multiprocessing.spawn(_rank_main, args=(2, _free_port(), two_shards, str(tmp_path)), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    everything = sorted(f"s{n:05d}" for n in range(40))
    for shuffle in MODES:
        keys = [rank[shuffle]["keys"] for rank in ranks]
        assert set(keys[0]).isdisjoint(keys[1]) and sorted(keys[0] + keys[1]) == everything
        assert ranks[0][shuffle]["steps"] == ranks[1][shuffle]["steps"] == 7  # 20 samples per rank, batches of 3
        states = [rank[shuffle]["state"] for rank in ranks]
        assert states[0] == states[1]  # any rank's checkpoint restores every rank
        # elastic: the 2-rank job resumes on 1 rank and serves exactly what nobody consumed
        resumed = TrainingLoader(_dataset(two_shards, shuffle), num_workers=2, collate_fn=_keep)
        resumed.load_state_dict(states[0])
        rest = [sample["__key__"] for batch in resumed for sample in batch]
        head = keys[0][:6] + keys[1][:6]
        assert sorted(head + rest) == everything and not collections.Counter(head + rest).most_common(1)[0][1] > 1
