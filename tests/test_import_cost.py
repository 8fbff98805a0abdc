"""What importing shardstream loads: a bare ``import shardstream`` and ``from shardstream import WebDataset`` stay
light (the HTTP client, TLS, e-mail parsing, YAML, numpy, thread pools and torch load when something needs them).

Each case runs in a fresh interpreter and inspects ``sys.modules``: which modules were loaded, not how long they
took (no timed assertion; ``python -X importtime -c "import shardstream"`` shows the times).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: modules that cost tens of milliseconds to import and that reading local shards never needs
HEAVY = ("http.client", "ssl", "email", "urllib.request", "yaml", "numpy", "concurrent.futures", "torch", "PIL",
         "fsspec", "http.server", "xml", "asyncio", "multiprocessing")
#: ... and what a bare ``import shardstream`` does not need either (the reading API, the settings and the openers load
#: on first use; ``dataclasses`` brings ``inspect``, ``ast``, ``dis`` and ``tokenize``; ``logging`` loads with the
#: first module that logs, or at import when ``SHARDSTREAM_VERBOSE`` asks for it)
BARE_ALSO = ("shardstream.pipeline", "shardstream.dataset", "shardstream.codecs", "shardstream.io",
             "shardstream.gopen", "shardstream.logs", "subprocess", "msgpack", "dataclasses", "inspect", "logging")


def loaded_by(statement: str) -> set[str]:
    """The modules ``statement`` loads in a fresh interpreter, torch made unimportable (as in a bare venv)."""
    code = ("import json, sys\nsys.modules['torch'] = None\nbefore = set(sys.modules)\n"
            f"{statement}\n"
            "print(json.dumps(sorted(m for m in set(sys.modules) - before if sys.modules[m] is not None)))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDSTREAM_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout))


def heavy_in(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_a_bare_import_loads_nothing_heavy():
    assert heavy_in(loaded_by("import shardstream"), HEAVY + BARE_ALSO) == []


@pytest.mark.parametrize("statement", ["from shardstream import WebDataset",
                                       "import shardstream as wds; wds.WebDataset, wds.TarWriter, wds.ShardWriter",
                                       "import shardstream.gopen, shardstream.io"])
def test_the_reading_api_loads_no_network_stack_nor_numpy(statement):
    assert heavy_in(loaded_by(statement), HEAVY) == []


def test_numpy_loads_with_the_first_batch(tmp_path):
    code = (f"import os, sys\nos.chdir({str(tmp_path)!r})\nimport shardstream as wds\n"
            "with wds.TarWriter('a.tar') as sink:\n"
            "    sink.write({'__key__': 'a', 'cls': 1})\n"
            "ds = wds.WebDataset('a.tar', shardshuffle=False).decode().to_tuple('cls')\n"
            "assert [s for s in ds] == [(1,)] and 'numpy' not in sys.modules\n"
            "assert next(iter(ds.batched(1)))[0].tolist() == [1]\n"
            "import numpy")
    modules = loaded_by(code)
    assert "numpy" in modules and heavy_in(modules, ("http.client", "ssl", "yaml")) == []


def test_webdataset_loads_neither_the_writer_nor_random_access():
    modules = loaded_by("from shardstream import WebDataset")
    assert heavy_in(modules, ("shardstream.writer", "shardstream.indexed.build", "shardstream.indexed.dataset",
                              "shardstream.indexed.sampler", "shardstream.order", "shardstream.training",
                              "shardstream.loader")) == []


def test_a_lazy_module_is_the_module_once_loaded(monkeypatch):
    import colorsys

    from shardstream._lazy import LazyModule

    lazy = LazyModule("colorsys")
    assert not hasattr(lazy, "__wrapped__")  # introspection does not load it (it is loaded here anyway)
    monkeypatch.setattr(lazy, "ONE_THIRD", 0.5)  # patching the stand-in patches the module, and is undone there
    assert colorsys.ONE_THIRD == 0.5 and lazy.ONE_THIRD == 0.5
    monkeypatch.undo()
    assert lazy.ONE_THIRD == colorsys.ONE_THIRD == 1.0 / 3.0
    monkeypatch.setattr(colorsys, "ONE_SIXTH", 0.25)  # and patching the module shows through the stand-in
    assert lazy.ONE_SIXTH == 0.25
