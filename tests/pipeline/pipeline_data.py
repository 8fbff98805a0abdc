"""Helpers of the pipeline tests (shard writing, fused-or-not runs) (a module of its own: importing ``conftest`` by name is ambiguous
when several test folders have one)."""

from __future__ import annotations

import io
import tarfile
import warnings

import numpy as np

from shardstream.pipeline import iteration


def write_tar(path, members):
    """Write ``[(name, bytes), ...]`` as a plain tar file at ``path``; return its path as a string."""
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return str(path)


def describe(value):
    """A batch (or any value) as plain data, for comparing two runs (arrays with their dtype)."""
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.tolist())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [describe(v) for v in value])
    return (type(value).__name__, value)


def fused_or_not(make, off: bool, monkeypatch):
    """(batches, states, error, the rest after restoring each state) of iterating ``make()``, with the fused plans
    (``off=False``) or with every stage run as its own generator (``off=True``)."""
    with monkeypatch.context() as m:
        if off:
            m.setattr(iteration, "fused", lambda items, makes: makes)
        out, states, error = [], [], None
        it = iter(make())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                for batch in it:
                    out.append(describe(batch))
                    states.append(it.state_dict())
            except Exception as exn:  # noqa: BLE001 - compared between the two runs
                error = (type(exn).__name__, str(exn))
            rests = []
            for state in states:
                again = make()
                again.load_state_dict(state)
                try:
                    rests.append([describe(b) for b in again])
                except Exception as exn:  # noqa: BLE001
                    rests.append((type(exn).__name__, str(exn)))
    return out, states, error, rests
