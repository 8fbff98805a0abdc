"""Samples per epoch under the trainers: each script of docs/integrations.md run in each configuration, 2 processes
on CPU, 100 samples in 7 shards. Prints one row per framework x configuration: samples served by all ranks over
the samples in the dataset (per epoch), distinct samples, batches of each rank, and whether a run resumed from a
mid-epoch checkpoint continued with exactly the batches of the uninterrupted run.

    python benchmarks/integrations_table.py            # every configuration (a few minutes on 2 cores)
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "integrations"))

from harness import TOTAL, epochs, launch, make_data, read_batches

ACCELERATE = [
    ("dispatch_batches=True (default)", ()),
    ("dispatch_batches=True, 2 workers", ("--workers", "2")),
    ("dispatch_batches=False", ("--dispatch-batches", "false")),
    ("dispatch_batches=False, 2 workers", ("--dispatch-batches", "false", "--workers", "2")),
    ("split_batches=True", ("--split-batches",)),
    ("split_batches=True, dispatch_batches=False", ("--split-batches", "--dispatch-batches", "false")),
]


def row(framework: str, config: str, output: str, resume: str = "n/a") -> str:
    result = epochs(read_batches(output))
    served = " / ".join(f"{e.served}/{TOTAL}" for e in result.values())
    distinct = " / ".join(str(e.distinct) for e in result.values())
    batches = " / ".join("x".join(str(b) for b in e.batches) for e in result.values())
    return f"| {framework} | {config} | {served} | {distinct} | {batches} | {resume} |"


def lightning_rows(folder: pathlib.Path, urls: str, workers: int) -> str:
    output = launch(folder, "train_lightning.py", urls, "--workers", str(workers), launcher="python")
    whole = read_batches(output)
    checkpoint = folder / "ckpt" / "step=9.ckpt"
    resumed = read_batches(launch(folder, "train_lightning.py", urls, "--workers", str(workers), "--resume",
                                  str(checkpoint), launcher="python"))
    done = 9 - len(whole[(0, 0)])
    exact = all(resumed.get((r, 1)) == whole[(r, 1)][done:] for r in (0, 1))
    resume = f"{'exact' if exact else 'NOT exact'} (from step 9, mid-epoch 1)"
    return row("Lightning ddp", f"TrainingLoader, {workers} workers", output, resume)


def main() -> None:
    print("| framework | configuration | served/expected (epoch 0 / 1) | distinct | batches per rank | resume |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        urls = make_data(folder)
        for config, args in ACCELERATE:
            print(row("Accelerate", config, launch(folder, "train_accelerate.py", urls, *args)), flush=True)
        print(row("HF Trainer", "defaults (dispatch_batches)", launch(folder, "train_hf.py", urls)), flush=True)
        for workers in (0, 2):
            print(lightning_rows(folder, urls, workers), flush=True)
        print(row("torchrun DDP", "TrainingLoader, 2 workers", launch(folder, "train_ddp.py", urls),
                  "exact (tests/training)"), flush=True)


if __name__ == "__main__":
    main()
