"""The scripts of docs/integrations.md, run with the real frameworks on CPU in 2 processes (gloo): every sample once
per epoch (or Accelerate's documented padding), the same number of batches on every rank, exact resume, and no gloo
thread outliving `destroy_process_group()` in any rank (the exit check of harness.py).

The dataset: 100 samples in 7 shards (odd on purpose: split between 2 ranks by shard, the ranks would differ).
"""

from __future__ import annotations

import pytest
from harness import TOTAL, epochs, exit_problems, launch, read_batches, scripts

pytest.importorskip("torch")


def served(output):
    return epochs(read_batches(output))


def test_every_script_is_on_the_page():
    assert set(scripts()) == {"train_accelerate.py", "train_hf.py", "train_lightning.py", "train_ddp.py",
                              "train_webdataset.py"}  # the last one runs in test_webdataset_ddp.py


@pytest.mark.parametrize("args", [(), ("--dispatch-batches", "false", "--workers", "2")],
                         ids=["dispatch_batches", "no_dispatch-2workers"])
def test_accelerate(workdir, args):
    pytest.importorskip("accelerate")
    folder, urls = workdir
    result = served(launch(folder, "train_accelerate.py", urls, *args))
    assert sorted(result) == [0, 1]
    for epoch in result.values():
        assert epoch.exact, epoch
        # Accelerate pads the last batches with the first samples: < ranks x batch_size (per worker without dispatch)
        assert TOTAL <= epoch.served < TOTAL + 2 * 8 * (2 if args else 1)


def test_hf_trainer(workdir):
    pytest.importorskip("transformers")
    folder, urls = workdir
    result = served(launch(folder, "train_hf.py", urls))
    assert sorted(result) == [0, 1]
    for epoch in result.values():
        assert epoch.exact and TOTAL <= epoch.served < TOTAL + 16, epoch


def test_lightning_checkpoint_and_exact_resume(workdir):
    pytest.importorskip("lightning")
    folder, urls = workdir
    whole = read_batches(launch(folder, "train_lightning.py", urls, launcher="python"))
    result = epochs(whole)
    assert sorted(result) == [0, 1] and all(e.exact and e.served <= TOTAL + 1 for e in result.values()), result
    per_epoch = len(whole[(0, 0)])  # batches per rank and epoch (7: 50 samples in batches of 8)
    # resume mid-epoch 1 from the checkpoint Lightning took after step 9 (= batch 2 of epoch 1)
    checkpoint = folder / "ckpt" / "step=9.ckpt"
    assert checkpoint.exists(), sorted(p.name for p in (folder / "ckpt").iterdir())
    resumed = read_batches(launch(folder, "train_lightning.py", urls, "--resume", str(checkpoint), launcher="python"))
    done = 9 - per_epoch
    assert sorted(resumed) == [(0, 1), (1, 1)]
    for rank in (0, 1):
        assert resumed[(rank, 1)] == whole[(rank, 1)][done:]


def test_torchrun_ddp(workdir):
    folder, urls = workdir
    result = served(launch(folder, "train_ddp.py", urls))
    assert sorted(result) == [0, 1]
    for epoch in result.values():
        assert epoch.exact and epoch.served == TOTAL, epoch


KEEPS_THE_GROUP = """
import torch.distributed as dist

dist.init_process_group("gloo")
kept = dist.group.WORLD  # outlives destroy_process_group(): destroyed during the interpreter's shutdown
dist.destroy_process_group()
print("rank", kept.rank(), "done", flush=True)
"""


def test_the_exit_check_sees_a_group_that_outlives_destroy(workdir):
    """What guards the scripts against the abort at exit (docs/integrations.md, "Ending cleanly"): a rank whose
    process group is still held after ``destroy_process_group()`` fails :func:`harness.launch`, every time."""
    folder, urls = workdir
    with pytest.raises(AssertionError, match="outlived destroy_process_group") as failed:
        launch(folder, "keeps_the_group.py", source=KEEPS_THE_GROUP)
    assert str(failed.value).count("after destroy_process_group ['gloo_tcp_loop'") == 2  # both ranks, each time


def test_exit_problems_reads_the_reports():
    clean = "shardstream-exitcheck pid=7 after_destroy=[] at_exit=[]\n"
    assert exit_problems(clean + clean.replace("7", "8")) == []
    assert exit_problems(clean) == ["1 exit reports for 2 ranks"]  # a rank without a report (or with no group)
    never = "shardstream-exitcheck pid=9 after_destroy=None at_exit=['pt_gloo_runloop']\n"
    assert exit_problems(clean + never) == ["pid 9: after destroy_process_group None, at exit ['pt_gloo_runloop']"]
    mixed = "shardstream-exitcheck pid=7 after_destroy=[] at_exit=[]rank 1 epoch 0 batch 3: [1, 2]\n"  # ranks' output
    assert exit_problems(mixed + clean.replace("7", "8")) == []  # shares lines
