"""Where the cluster tests' processes find their code (a module of its own: ``conftest`` names one module per
directory, so test files import shared helpers from here, never from ``conftest``)."""

from __future__ import annotations

import os
import pathlib

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent


def worker_env() -> dict[str, str]:
    """This process's environment with tests/cluster, tests (the shared helpers: the scheduler unpickles functions
    of conftest, which imports them) and src first on an absolute PYTHONPATH."""
    paths = [str(HERE), str(HERE.parent), str(ROOT / "src"), *(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}
