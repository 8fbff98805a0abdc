"""Functions the processing tests map over samples: importable by name, so local pool workers and separate Dask
worker processes (started with this folder on PYTHONPATH) can unpickle them."""

from __future__ import annotations

import os
import signal
import time


def upper(sample):
    """A pure function of the sample: text upper-cased, one field added."""
    return {"txt": sample["txt"].upper(), "len.cls": len(sample["txt"])}


def explode(sample):
    """Two output samples per input sample."""
    return [{"__key__": sample["__key__"] + suffix, "txt": sample["txt"] + suffix.encode()} for suffix in ("a", "b")]


def keep_even(sample):
    return sample if int(sample["cls"]) % 2 == 0 else None


def tag_pid(sample):
    """Which process handled the sample (slowly enough that every worker gets tasks)."""
    time.sleep(0.01)
    return {**sample, "pid.txt": str(os.getpid())}


def first_of_shard(samples):
    """per="shard": the first sample of each shard only."""
    for sample in samples:
        yield sample
        return


class Once:
    """Behave like ``upper``, but the first time (a marker file not yet there) the sample ``key`` is reached, do
    ``what``: ``"raise"``, or ``"kill"`` (SIGKILL this very process: the worker dies mid-task). ``slow`` seconds
    of sleep per sample leave time for other tasks to be running at the moment of the kill."""

    def __init__(self, marker: str, key: str, what: str, slow: float = 0.0):
        self.marker, self.key, self.what, self.slow = marker, key, what, slow

    def describe(self) -> str:  # same job identity as upper: a rerun after the kill may reuse its tasks
        return "jobfns:upper"

    def __call__(self, sample):
        time.sleep(self.slow)
        if sample["__key__"] == self.key and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            if self.what == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"transient failure at {self.key}")
        return upper(sample)


class Always:
    """Fail on sample ``key`` every time."""

    def __init__(self, key: str):
        self.key = key

    def __call__(self, sample):
        if sample["__key__"] == self.key:
            raise ValueError(f"cannot process {self.key}")
        return upper(sample)
