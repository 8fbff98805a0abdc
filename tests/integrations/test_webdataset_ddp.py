"""A plain WebDataset under real DDP processes (2 ranks, torch.distributed gloo), on 7 shards that do not split
evenly between the ranks: by default a typed error that names the fixes, never ranks with different batch counts
(DDP would hang); with ``equalize=True`` (counts from the shards' sidecar indexes) every rank gets the same
batches, which ``len(WebLoader)`` knows, in every epoch, with DataLoader workers. Every rank takes a collective
step per batch, as DDP does: unequal batch counts would hang, then time out."""

from __future__ import annotations

import datetime
import json
import os
import socket

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import shardstream as wds  # noqa: E402
from shardstream.indexed import index_dataset  # noqa: E402
from shardstream.testing import write_shards  # noqa: E402


def _number(sample):
    return int(sample["cls"])


def _rank_main(rank: int, world: int, port: int, urls: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    result: dict = {}
    try:
        list(wds.WebLoader(wds.WebDataset(urls, shardshuffle=True), batch_size=None, num_workers=0))
    except wds.UnevenSplitError as e:
        result["error"] = [type(e).__name__, str(e), e.shards, e.ranks]
    dataset = wds.WebDataset(urls, shardshuffle=True, equalize=True).map(_number)
    loader = wds.WebLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context="fork")
    result["epochs"] = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        expected, numbers, steps = len(loader), [], 0
        for batch in loader:
            numbers += batch.tolist()
            step = torch.ones(1)
            dist.all_reduce(step)  # hangs (then times out) if a rank ran out of batches
            steps += 1
        result["epochs"].append({"len": expected, "steps": steps, "numbers": numbers})
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_uneven_shards_under_ddp_error_by_default_and_equalize(tmp_path):
    shards = write_shards(tmp_path / "shards", [15] * 6 + [10], {"cls": lambda shard, index, number: number})
    index_dataset(shards, tmp_path / "shards.json")  # the sidecars next to the shards (and a dataset index)
    urls = str(tmp_path / "shards" / "shard-{000000..000006}.tar")
    # the ranks are forked (CPU only: nothing to re-import, a few seconds instead of a minute on a busy machine)
    torch.multiprocessing.start_processes(_rank_main, args=(2, _free_port(), urls, str(tmp_path)), nprocs=2,
                                          join=True, start_method="fork")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rank in ranks:
        name, message, shards_count, world = rank["error"]
        assert (name, shards_count, world) == ("UnevenSplitError", 7, 2)
        assert "7 shards cannot be split evenly between 2 ranks" in message
        assert all(fix in message for fix in ("with_epoch", "resampled=True", "equalize=True", "TrainingDataset"))
    orders = []
    for epoch in range(2):
        served = [rank["epochs"][epoch] for rank in ranks]
        assert served[0]["steps"] == served[1]["steps"] == served[0]["len"] == served[1]["len"] > 0
        assert len(served[0]["numbers"]) == len(served[1]["numbers"])  # equal samples on every rank
        both = served[0]["numbers"] + served[1]["numbers"]
        assert len(both) == len(set(both)) and set(both) <= set(range(100))  # each at most once
        # 4 shards against 3: position 3 keeps nothing, positions 0-2 keep the smaller of the two shards there
        assert len(both) in (80, 90)
        orders.append(both)
    assert orders[0] != orders[1]  # each epoch deals the shards anew
