"""The top level comes from one table: ``_API`` in ``shardstream/__init__.py`` (module -> names).

The lazy ``__getattr__`` map is derived from it at run time; ``__all__`` and the static imports type checkers read
are written from it by scripts/gen_init_api.py (``--check``: the checked-in block is current).
"""

from __future__ import annotations

import importlib
import os
import pathlib
import subprocess
import sys

import pytest

import shardstream

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = pathlib.Path(shardstream.__file__).parent
SCRIPT = ROOT / "scripts" / "gen_init_api.py"


def run_fresh(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this tree's package; its failure fails the test."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=str(SRC.parent)))
    assert result.returncode == 0, result.stderr
    return result


def test_the_static_imports_are_generated_from_the_table():
    """Change ``_API``, then run ``python scripts/gen_init_api.py``: the block between the markers is its output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC.parent), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_generator_rewrites_a_changed_table(tmp_path):
    """The block follows the table: a name added to a lazy module appears under TYPE_CHECKING, once."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        gen = importlib.import_module("gen_init_api")
    finally:
        sys.path.remove(str(SCRIPT.parent))
    text = (SRC / "__init__.py").read_text()
    changed = text.replace('"compat": "Processor"', '"compat": "Processor Other"', 1)
    assert changed != text
    block = gen.block(changed)
    assert block.count("Other as Other,") == 1
    assert block.index("Other as Other,") > block.index("if _typing.TYPE_CHECKING:")
    assert gen.source(text) == text


def test_each_name_is_listed_once_and_comes_from_its_module():
    listed = [name for names in shardstream._API.values() for name in names.split()]
    assert len(listed) == len(set(listed))
    assert shardstream.__all__ == sorted(listed)
    for module, names in shardstream._API.items():
        home = importlib.import_module(f"shardstream.{module}")
        wrong = [name for name in names.split() if getattr(shardstream, name) is not getattr(home, name)]
        assert wrong == [], f"{module}: {wrong}"


def test_eager_names_load_with_the_package_and_the_rest_on_first_use():
    code = ("import sys, shardstream as s; print(any(n in vars(s) for n in s._PIPELINE_NAMES), "
            "'shardstream.pipeline' in sys.modules, all(n in vars(s) for n in s._API['errors'].split()))")
    result = run_fresh(code)
    assert result.stdout.split() == ["False", "False", "True"], result.stdout + result.stderr


@pytest.mark.parametrize("first", ["import shardstream.gopen",
                                   "import shardstream; shardstream.gopen; import shardstream.gopen",
                                   "from shardstream import gopen_schemes", "from shardstream.gopen import reader",
                                   "import shardstream.gopen as g; assert callable(g)"])
def test_gopen_stays_the_function_when_its_module_loads(first):
    """``shardstream.gopen`` is webdataset's function, however and whenever ``shardstream.gopen`` the module loads
    (``import shardstream`` no longer loads it first: the package keeps the function, ``_Package``)."""
    code = (f"{first}\nimport sys, types, shardstream, shardstream.io\n"
            "assert shardstream.gopen is shardstream.io.gopen, shardstream.gopen\n"
            "assert isinstance(sys.modules['shardstream.gopen'], types.ModuleType)\n"
            "assert sys.modules['shardstream.gopen'].reader('pipe:printf x').read() == b'x'\n")
    run_fresh(code)


def test_the_package_s_modules_are_attributes_on_first_use():
    """A bare ``import shardstream`` loads few modules, yet ``shardstream.io``, ``shardstream.training``...
    work as they did when more loaded with the package; a name that is no module stays an AttributeError."""
    code = ("import sys, shardstream as s\n"
            "assert 'shardstream.io' not in sys.modules\n"
            "assert s.io.open_url and s.logs.log_to_stderr and s.training.TrainingDataset\n"
            "assert not hasattr(s, 'no_such_module') and not hasattr(s, '_no_such')\n")
    run_fresh(code)
