"""Run every benchmark in this folder, one after the other, and print their tables.

    make bench        (creates .venv-bench with webdataset==1.0.2 next to shardstream)
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent

#: the arguments of a benchmark whose full run takes too long for this tour (run it on its own for all sizes)
ARGUMENTS = {"bench_scale.py": ["--quick"]}


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"# {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script), *ARGUMENTS.get(script.name, [])], cwd=HERE).returncode != 0:
            failed.append(script.name)
        print(flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
