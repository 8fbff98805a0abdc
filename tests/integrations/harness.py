"""Runs the scripts of docs/integrations.md with their real launchers, and reads what each rank trained on.

Every script prints ``rank R epoch E batch B: [sample numbers]`` per batch; :func:`read_batches` collects them and
:class:`Epoch` sums them up (samples served, distinct, batches per rank). Used by the tests of this folder and by
``benchmarks/integrations_table.py``.

Every process :func:`launch` starts loads ``exitcheck/sitecustomize.py``; a rank that created a process group
reports whether gloo's threads had ended when ``destroy_process_group()`` returned, and whether any still runs at
exit, and :func:`launch` fails when one did not end: such a group is destroyed during the interpreter's shutdown,
where a gloo thread can abort the process (docs/integrations.md, "Ending cleanly").
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "integrations.md"
LINE = re.compile(r"rank (\d+) epoch (\d+) batch (\d+): \[([\d, ]*)\]")  # two ranks may write on one line
TOTAL = 100  # the samples the page's data block writes
EXITCHECK = pathlib.Path(__file__).resolve().parent / "exitcheck"
EXIT_LINE = re.compile(r"shardstream-exitcheck pid=(\d+) after_destroy=(None|\[[^]]*\]) at_exit=(\[[^]]*\])")


def scripts() -> dict[str, str]:
    """The page's scripts by file name (a python block whose first line is ``# file: NAME``)."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.DOTALL | re.MULTILINE)
    return {m.group(1): body for body in blocks if (m := re.match(r"# file: (\S+)\n", body))}


def make_data(folder: pathlib.Path) -> str:
    """The page's data block, run in ``folder``; returns the shard pattern."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.DOTALL | re.MULTILINE)
    namespace: dict = {}
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(blocks[0], namespace)
    finally:
        os.chdir(here)
    return namespace["URLS"]


def launch(folder: pathlib.Path, name: str, *args: str, launcher: str = "torchrun", timeout: int = 300,
           source: str | None = None) -> str:
    """Write the script ``name`` into ``folder`` (or ``source``) and run it there in 2 processes; its output.
    Fails when the run fails or a rank's gloo threads outlived ``destroy_process_group()`` (see
    :func:`exit_problems`)."""
    (folder / name).write_text(source if source is not None else scripts()[name])
    command = [sys.executable, name, *args]
    if launcher == "torchrun":
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", name,
                   *args]
    path = os.pathsep.join(p for p in (str(EXITCHECK), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONWARNINGS="ignore")
    r = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    output = r.stdout + r.stderr
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {r.returncode}:\n{output[-6000:]}")
    problems = exit_problems(output)
    if problems:
        raise AssertionError(f"{' '.join(command)}: gloo threads outlived destroy_process_group(): {problems}")
    return output


def exit_problems(output: str, ranks: int = 2) -> list[str]:
    """What the ranks' exit reports (``exitcheck/sitecustomize.py``) say went wrong: a report missing (a rank
    that did not destroy its process group, or no report at all), or gloo threads still running after
    ``destroy_process_group()`` or at exit."""
    reports = EXIT_LINE.findall(output)
    problems = [f"pid {pid}: after destroy_process_group {after}, at exit {at_exit}"
                for pid, after, at_exit in reports if after != "[]" or at_exit != "[]"]
    if len(reports) != ranks:
        problems.append(f"{len(reports)} exit reports for {ranks} ranks")
    return problems


def read_batches(output: str) -> dict[tuple[int, int], list[list[int]]]:
    """``(rank, epoch) -> [batch, ...]`` in order, each batch its sample numbers."""
    found: dict[tuple[int, int], dict[int, list[int]]] = {}
    for rank, epoch, batch, numbers in LINE.findall(output):
        found.setdefault((int(rank), int(epoch)), {})[int(batch)] = [int(n) for n in numbers.split(",") if n.strip()]
    return {key: [by_batch[b] for b in sorted(by_batch)] for key, by_batch in sorted(found.items())}


@dataclasses.dataclass
class Epoch:
    """One epoch of a run: samples served by all ranks, distinct ones, batches of each rank."""

    served: int
    distinct: int
    batches: tuple[int, ...]

    @property
    def exact(self) -> bool:
        """Every sample of the dataset, and equal batch counts on the ranks."""
        return self.distinct == TOTAL and len(set(self.batches)) == 1


def epochs(batches: dict[tuple[int, int], list[list[int]]], ranks: int = 2) -> dict[int, Epoch]:
    out = {}
    for epoch in sorted({e for _, e in batches}):
        per_rank = [batches.get((r, epoch), []) for r in range(ranks)]
        numbers = [n for rank in per_rank for batch in rank for n in batch]
        out[epoch] = Epoch(len(numbers), len(set(numbers)), tuple(len(rank) for rank in per_rank))
    return out
