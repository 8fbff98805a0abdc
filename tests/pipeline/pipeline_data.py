"""Shard-writing helpers of the pipeline tests (a module of its own: importing ``conftest`` by name is ambiguous
when several test folders have one)."""

from __future__ import annotations

import io
import tarfile


def write_tar(path, members):
    """Write ``[(name, bytes), ...]`` as a plain tar file at ``path``; return its path as a string."""
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return str(path)
