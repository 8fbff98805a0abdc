"""Functions the Dask workers of the cluster tests import by name (tests/cluster is on their PYTHONPATH)."""

from __future__ import annotations

import os
import signal


def tag_pid(sample):
    """The sample, with the process that made it."""
    return {**sample, "pid": os.getpid()}


class KillOnce:
    """SIGKILL the process the first time ``key`` goes through (a marker file, made exclusively, remembers it:
    the task rerun elsewhere goes through)."""

    def __init__(self, marker: str, key: str):
        self.marker, self.key = marker, key

    def __call__(self, sample):
        if sample["__key__"] == self.key:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return sample
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
        return sample


class FailOn:
    """Raise ValueError on ``key``, appending a line to ``log`` each time (how often the task ran)."""

    def __init__(self, log: str, key: str):
        self.log, self.key = log, key

    def __call__(self, sample):
        if sample["__key__"] == self.key:
            with open(self.log, "a") as f:
                f.write("raised\n")
            raise ValueError(f"bad sample {self.key}")
        return sample
