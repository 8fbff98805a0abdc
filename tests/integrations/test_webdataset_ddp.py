"""A plain WebDataset under real DDP processes (2 ranks, torch.distributed gloo), on the 7 shards of
docs/integrations.md, which do not split evenly between the ranks: by default a typed error that names the fixes,
never ranks with different batch counts (DDP would hang); with ``equalize=True`` (the page's
``train_webdataset.py``, run as it is) every rank gets the same batches, which ``len(WebLoader)`` knows, in every
epoch, with 2 DataLoader workers. DDP's gradient all-reduce at every step would hang on unequal batch counts.

The ranks are forked from the test process (CPU only: nothing to re-import, a few seconds instead of a minute on a
busy machine); test_frameworks.py runs the other scripts with their real launchers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket

import pytest
from exitcheck.gloo_exitcheck import gloo_threads
from harness import TOTAL, epochs, read_batches, scripts

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import shardstream as wds  # noqa: E402


def _rank_main(rank: int, world: int, port: int, folder: str, urls: str) -> None:
    os.chdir(folder)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    try:
        next(iter(wds.WebDataset(urls, shardshuffle=True)))
        error = None
    except wds.UnevenSplitError as e:
        error = [type(e).__name__, str(e), e.shards, e.ranks]
    with open(f"rank{rank}.json", "w") as f:
        json.dump(error, f)
    namespace: dict = {"__name__": "train_webdataset"}
    exec(scripts()["train_webdataset.py"], namespace)
    with open(f"rank{rank}.txt", "w") as out, contextlib.redirect_stdout(out):
        namespace["main"](urls)
    with open(f"rank{rank}.threads.json", "w") as f:  # the page's "Ending cleanly": none left by main()
        json.dump(gloo_threads(), f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_uneven_shards_under_ddp_error_by_default_and_equalize(workdir):
    folder, urls = workdir
    import torch._dynamo  # noqa: F401, PLC0415 - what DDP imports when first built: once here, not in each rank
    torch.multiprocessing.start_processes(_rank_main, args=(2, _free_port(), str(folder), urls), nprocs=2,
                                          join=True, start_method="fork")
    for rank in range(2):
        assert json.loads((folder / f"rank{rank}.threads.json").read_text()) == []
        name, message, shards, ranks = json.loads((folder / f"rank{rank}.json").read_text())
        assert (name, shards, ranks) == ("UnevenSplitError", 7, 2)
        assert "7 shards cannot be split evenly between 2 ranks" in message
        assert all(fix in message for fix in ("with_epoch", "resampled=True", "equalize=True", "TrainingDataset"))
    output = "".join((folder / f"rank{rank}.txt").read_text() for rank in range(2))
    lengths = {(int(r), int(e)): int(n) for r, e, n in re.findall(r"rank (\d) epoch (\d) batches (\d+)", output)}
    batches = read_batches(output)
    result = epochs(batches)
    assert sorted(result) == [0, 1]
    for epoch, served in result.items():
        assert served.batches[0] == served.batches[1] == lengths[(0, epoch)] == lengths[(1, epoch)]  # equal, known
        assert served.served == served.distinct  # each sample at most once
        per_rank = [sum(len(b) for b in batches[(rank, epoch)]) for rank in range(2)]
        assert per_rank[0] == per_rank[1]  # equal shares
        # 4 shards against 3: position 3 keeps nothing, positions 0-2 the smaller of the two shards there
        assert served.served in (80, 90) and served.served <= TOTAL
    print({epoch: (served.served, served.batches) for epoch, served in result.items()})
