"""``benchmarks/bench_scale.py`` at its smallest sizes (``--smoke``: seconds), so the scale benchmark cannot rot:
every curve runs, checks its equal shares and sample counts, and prints its table."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_scale_benchmark_runs_its_smallest_sizes(tmp_path):
    out = tmp_path / "scale.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "BENCH_SCALE_DATA": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--smoke", "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    for title in ("## 1. planning", "## 2. resume", "## 3. IndexedDataset", "## 4. the shard cache"):
        assert title in text
    assert "| NO |" not in text  # every rank's share was equal
    assert "- state size: constant" in text  # a saved state does not grow with the position
