"""The fuzz target (``make fuzz``, ``fuzz/fuzz_shardstream.py``) runs for a few seconds in the suite.

It must find nothing: every mutated tar, sidecar index, dataset index and field gives a result or a typed
shardstream error, the same by every reader path. The checked-in corpus covers every kind, and a planted bug
is reported (so a run with no finding means something).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))
import fuzz_shardstream  # noqa: E402
import targets  # noqa: E402


def test_a_short_fuzz_run_finds_nothing(tmp_path):
    result = subprocess.run([sys.executable, str(FUZZ / "fuzz_shardstream.py"), "--seconds", "4", "--seed", "18",
                             "--findings", str(tmp_path)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "0 findings" in result.stdout
    inputs = int(result.stdout.split("fuzzed ")[1].split()[0])
    assert inputs > 50, result.stdout


def test_the_corpus_has_every_kind_and_is_small():
    corpus = fuzz_shardstream.load_corpus(fuzz_shardstream.CORPUS)
    assert all(corpus[kind] for kind in fuzz_shardstream.KINDS)
    assert sum(path.stat().st_size for path in fuzz_shardstream.CORPUS.iterdir()) < 64 << 10


def test_a_planted_bug_is_a_finding(monkeypatch, tmp_path):
    def broken(ext, data, rng):
        raise KeyError("planted")

    monkeypatch.setattr(targets, "check_field", broken)
    result = fuzz_shardstream.run(1.0, seed=3, findings=tmp_path, alarm=False)
    assert result["inputs"]["field"] > 0 and result["findings"]
    assert "KeyError" in result["findings"][0] and list(tmp_path.glob("field-*.txt"))


def test_paths_that_disagree_are_a_finding():
    with pytest.raises(targets.Finding, match="differ"):
        targets._same("two readers", ("ok", [1], []), ("ok", [2], []))
    with pytest.raises(targets.Finding, match="untyped ZeroDivisionError"):
        targets.outcome(lambda: 1 / 0)
