"""`shardstream cat --spec`: one epoch of a spec's exact mix, written as shards (a real subprocess)."""

from __future__ import annotations

import subprocess
import sys
import tarfile

from shardstream.testing import write_shards

SPEC = """epoch_size: 10
sources:
  - shards: a/shard-{000000..000001}.tar
    proportion: 0.6
  - shards: b/shard-000000.tar
    proportion: 0.4
"""


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "shardstream", *args], cwd=cwd, capture_output=True, text=True)


def test_cat_writes_one_epoch_of_the_mix(tmp_path):
    write_shards(tmp_path / "a", [5, 5], {"src": "a"}, key="a{number}")
    write_shards(tmp_path / "b", [4], {"src": "b"}, key="b{number}")
    (tmp_path / "mix.yaml").write_text(SPEC)
    for epoch in ("0", "1"):
        r = run("cat", "--spec", "mix.yaml", "--epoch", epoch, "-o", f"e{epoch}.tar", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    names = [tarfile.open(tmp_path / f"e{e}.tar").getnames() for e in "01"]
    for got in names:
        assert len(got) == 10 and sum(n.startswith("a") for n in got) == 6
    assert names[0] != names[1]


def test_cat_spec_refuses_inputs_and_commands(tmp_path):
    (tmp_path / "mix.yaml").write_text("sources:\n  - shards: 'pipe:touch pwned'\n    choose: 1\n")
    r = run("cat", "--spec", "mix.yaml", "-o", "out.tar", cwd=tmp_path)
    assert r.returncode != 0 and "allow" in r.stderr and not (tmp_path / "pwned").exists()
    r = run("cat", "x.tar", "--spec", "mix.yaml", "-o", "out.tar", cwd=tmp_path)
    assert r.returncode != 0 and "--spec replaces INPUTs" in r.stderr
    r = run("cat", "-o", "out.tar", cwd=tmp_path)
    assert r.returncode != 0 and "needs INPUT" in r.stderr
