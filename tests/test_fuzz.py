"""The fuzz targets (``make fuzz``, ``fuzz/fuzz_shardstream.py``) run for a few seconds in the suite.

They must find nothing new: every mutated tar, sidecar index, dataset index and field gives a result or a typed
shardstream error, the same by every reader path; every mutated spec, state, stream file, TFRecord file and HTTP
answer gives a result or one of its target's allowed errors. Findings of the classes ``fuzz/known.py`` lists
(bugs another branch fixes) do not fail a run; each class's reproducer in ``fuzz/known/`` is replayed here and
reported as an expected failure until the fix lands (then it passes: remove the entry). The checked-in corpus
covers every kind, and a planted bug is reported (so a run with no finding means something).
"""

from __future__ import annotations

import pathlib
import random
import subprocess
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))
import fuzz_shardstream  # noqa: E402
import known  # noqa: E402
import target_http  # noqa: E402
import targets  # noqa: E402

OLD = ["tar", "field", "ssidx", "dsindex"]
NEW = ["spec", "state", "stream", "tfrecord", "http"]


def short_run(tmp_path, kinds, inputs, seed):
    """A seeded run of ``inputs`` inputs: the same inputs however loaded the machine is (never timed)."""
    result = subprocess.run([sys.executable, str(FUZZ / "fuzz_shardstream.py"), "--targets", ",".join(kinds),
                             "--inputs", str(inputs), "--seconds", "600", "--seed", str(seed), "--findings",
                             str(tmp_path)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert " 0 findings" in result.stdout, result.stdout
    counts = result.stdout.split("): ", 1)[1].split(";")[0]
    return {kind: int(n) for kind, n in (part.split() for part in counts.split(", "))}


def test_a_short_fuzz_run_finds_nothing(tmp_path):
    counts = short_run(tmp_path, OLD, 600, 18)
    assert sum(counts.values()) == 600 and all(counts.values()), counts


def test_a_short_run_of_the_new_targets_finds_nothing_new(tmp_path):
    counts = short_run(tmp_path, NEW, 250, 7)
    assert sum(counts.values()) == 250 and all(counts[kind] >= 20 for kind in NEW), counts


@pytest.mark.parametrize("entry", [e for e in known.KNOWN if e.seed], ids=lambda e: e.name)
def test_known_findings_reproduce_until_fixed(entry):
    data = (FUZZ / "known" / f"{entry.name}.bin").read_bytes()
    try:
        fuzz_shardstream.one(entry.kind, entry.seed, data, random.Random(0))
    except Exception as e:  # noqa: BLE001 - a finding: it must be of its entry's class
        assert known.classify(entry.kind, e) == entry, known.signature(e)
        pytest.xfail(f"known finding {entry}: {known.signature(e)[:200]}")


def test_a_known_finding_does_not_fail_a_run_unless_strict(monkeypatch):
    def lenient(data, rng):
        raise targets.Finding("split_status_line accepted the malformed Content-Range 'x' as (0, 1)")

    monkeypatch.setattr(target_http, "check_http", lenient)
    planted = known.Known("planted-lenient-content-range", "http", r"^Finding: split_status_line accepted the",
                          "HTTP", None)
    monkeypatch.setattr(known, "KNOWN", [*known.KNOWN, planted])
    result = fuzz_shardstream.run(0.3, seed=1, kinds=["http"], alarm=False)
    assert result["inputs"]["http"] > 0 and result["known"] and not result["findings"]
    assert "planted-lenient-content-range" in result["known"][0]
    strict = fuzz_shardstream.run(0.3, seed=1, kinds=["http"], alarm=False, strict=True)
    assert strict["findings"] and not strict["known"]


def test_the_content_range_reference_follows_rfc_9110():
    assert target_http.strict_content_range("bytes 0-9/10") == (0, 10)
    assert target_http.strict_content_range("bytes 5-9/*") == (5, None)
    for bad in ["bytes 5-2/10", "bytes 0-10/10", "bytes +0-9/10", "bytes 0-?/10", "bytes */10", "items 0-9/10"]:
        assert target_http.strict_content_range(bad) is None, bad


def test_the_corpus_has_every_kind_and_is_small():
    corpus = fuzz_shardstream.load_corpus(fuzz_shardstream.CORPUS)
    assert all(corpus[kind] for kind in fuzz_shardstream.KINDS)
    assert sum(path.stat().st_size for path in fuzz_shardstream.CORPUS.iterdir()) < 64 << 10


def test_a_planted_bug_is_a_finding(monkeypatch, tmp_path):
    def broken(ext, data, rng):
        raise KeyError("planted")

    monkeypatch.setattr(targets, "check_field", broken)
    result = fuzz_shardstream.run(1.0, seed=3, findings=tmp_path, alarm=False, kinds=OLD)
    assert result["inputs"]["field"] > 0 and result["findings"]
    assert "KeyError" in result["findings"][0] and list(tmp_path.glob("field-*.txt"))


def test_paths_that_disagree_are_a_finding():
    with pytest.raises(targets.Finding, match="differ"):
        targets._same("two readers", ("ok", [1], []), ("ok", [2], []))
    with pytest.raises(targets.Finding, match="untyped ZeroDivisionError"):
        targets.outcome(lambda: 1 / 0)
