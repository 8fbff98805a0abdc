"""Type checkers and IDEs follow ``wds.WebDataset(...).shuffle(...).decode(...)``.

The fluid methods are made at run time from the stage table (``stage()`` in pipeline/core.py); their declarations
for type checkers (pipeline/_fluid.py) are written from the same table by scripts/gen_fluid_types.py. These tests
keep the two in step and check, with mypy, that a README-style chain keeps its class and a misspelt method is an
error.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

import shardstream
from shardstream.pipeline import DataPipeline, FluidInterface

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = pathlib.Path(shardstream.__file__).parent
SCRIPT = ROOT / "scripts" / "gen_fluid_types.py"


def _env() -> dict[str, str]:
    """This checkout's package first (the script and mypy import or check it, not another installed copy)."""
    path = os.pathsep.join(p for p in (str(SRC.parent), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, MYPYPATH=str(SRC.parent))


def test_the_declarations_are_generated_from_the_stage_table():
    """pipeline/_fluid.py is what the script writes now: add or change a stage, then run the script."""
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_fluid_method_is_declared_and_still_made_at_run_time():
    """The declarations are for type checkers only: at run time FluidInterface has no such base, and stage()
    still makes every method (with the stage's signature)."""
    assert FluidInterface.__bases__ == (object,)
    tree = (SRC / "pipeline" / "_fluid.py").read_text()
    made = sorted(name for name, value in vars(FluidInterface).items() if callable(value) and name != "compose"
                  and not name.startswith("_"))  # fmt: skip
    assert {"shuffle", "decode", "to_tuple", "batched", "with_epoch", "mcached"} <= set(made)
    for name in made:
        assert f"    def {name}(" in tree, f"{name} is not declared in pipeline/_fluid.py: run {SCRIPT.name}"
    pipeline = DataPipeline(({"__key__": "a", "cls": b"1"}, {"__key__": "b", "cls": b"2"}))
    assert list(pipeline.decode().to_tuple("cls").batched(2, collation_fn=None)) == [[(1,), (2,)]]


CHAIN = """\
import shardstream as wds

reveal_type(wds.WebDataset("a.tar").shuffle(100).decode("rgb").to_tuple("png", "cls").batched(16))
reveal_type(wds.DataPipeline(wds.SimpleShardList("a.tar"), wds.tarfile_to_samples()).shuffle(10).map(len))
wds.WebDataset("a.tar").shuffle(100).shufle(10)
"""


def test_mypy_follows_a_readme_chain_and_refuses_a_misspelt_method(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (it is in the `test` extra)")
    program = tmp_path / "chain.py"
    program.write_text(CHAIN)
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"),
                             "--config-file", str(ROOT / "pyproject.toml"), str(program)], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=600)
    # by file name: mypy's shared cache may report an earlier run's identical chain.py under that run's tmp path
    ours = [line.split(": ", 1)[1] for line in result.stdout.splitlines()
            if line.split(":", 1)[0].endswith(f"/{program.name}")]
    assert ours[:2] == ['note: Revealed type is "shardstream.dataset.WebDataset"',
                        'note: Revealed type is "shardstream.pipeline.datapipeline.DataPipeline"'], result.stdout
    if importlib.util.find_spec("torch") is None:  # then the pipelines' base (torch's IterableDataset) is Any
        pytest.skip("without torch a type checker cannot tell a misspelt method of a pipeline")
    assert ours[2:] == ['error: "WebDataset" has no attribute "shufle"  [attr-defined]'], result.stdout
