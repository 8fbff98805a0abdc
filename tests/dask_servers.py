"""Starting real Dask processes for the tests (the process engine's and the cluster loader's): a free port on
127.0.0.1 and the ``dask`` command of this interpreter's environment."""

from __future__ import annotations

import os
import shutil
import socket
import sys


def free_port() -> int:
    """A TCP port nobody listens on at the moment, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask_command() -> list[str]:
    """``dask`` as a command line: the venv's script, else the module."""
    found = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    return [found] if found else [sys.executable, "-m", "distributed.cli.dask_spec"]
