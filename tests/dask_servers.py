"""Starting real Dask processes for the tests (the process engine's and the cluster loader's): a free port on
127.0.0.1 and the ``dask`` command of this interpreter's environment."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any


def free_port() -> int:
    """A TCP port nobody listens on at the moment, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask_command() -> list[str]:
    """``dask`` as a command line: the venv's script, else the module."""
    found = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    return [found] if found else [sys.executable, "-m", "distributed.cli.dask_spec"]


@contextlib.contextmanager
def dask_cluster(logs: pathlib.Path, env: dict[str, str], workers: int = 2) -> Iterator[tuple[str, Any]]:
    """A ``dask scheduler`` and ``workers`` ``dask worker`` processes (one thread each, with their nannies) on
    127.0.0.1, their stderr in ``logs``: ``(address, client)``; stopped with SIGTERM (killed after 15 s)."""
    import distributed  # noqa: PLC0415 - the callers skip without dask

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    commands = [["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]]
    commands += [["worker", address, "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{n}"]
                 for n in range(workers)]
    procs: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as files:
        try:
            for command in commands:
                log = files.enter_context(open(logs / f"{command[0]}{len(procs)}.log", "wb"))
                procs.append(subprocess.Popen([*dask_command(), *command], stdout=subprocess.DEVNULL, stderr=log,
                                              env=env))
            client = distributed.Client(address, timeout=60)
            try:
                client.wait_for_workers(workers, timeout=120)
                yield address, client
            finally:
                client.close()
        finally:
            for proc in reversed(procs):  # SIGTERM: a graceful stop
                proc.terminate()
            for proc in reversed(procs):
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
