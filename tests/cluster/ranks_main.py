"""One trainer rank under torch.distributed.run: a ClusterLoader on the scheduler given, an all_reduce per batch
(as DDP: unequal batch counts would hang), the keys it saw and its state after 2 batches written to OUT/rankN.json."""

from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

from shardstream.cluster import ClusterLoader
from shardstream.training import TrainingDataset


def main(address: str, out: str, shards: list[str]) -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    dataset = TrainingDataset(shards, batch_size=6, seed=9, decode=True)  # rank and world from torch.distributed
    keys, steps, state = [], 0, None
    with ClusterLoader(dataset, address, in_flight=4) as loader:
        for batch in loader:
            keys.append(list(batch["__key__"]))
            step = torch.ones(1)
            dist.all_reduce(step)
            steps += 1
            if steps == 2:
                state = loader.state_dict()
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"keys": keys, "steps": steps, "state": state}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
