"""`make demo` (python -m shardstream.demo) on a small size, and on a user's ImageFolder-style folder."""

import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from shardstream import demo


def run_demo(*args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "shardstream.demo", *args], capture_output=True, text=True, timeout=240
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_embedded_dataset_is_deterministic():
    a = list(demo.render_digits(20, seed=3))
    b = list(demo.render_digits(20, seed=3))
    assert a == b
    assert {label for _, label in demo.render_digits(200, seed=0)} == set(range(10))


def test_demo_builds_shards_and_trains(tmp_path):
    out = run_demo("--samples", "1200", "--epochs", "2", "--out", str(tmp_path), "--workers", "2")
    shards = sorted(p.name for p in tmp_path.glob("*.tar"))
    assert shards == ["train-000000.tar", "train-000001.tar", "val-000000.tar"]
    assert "epoch 2/2" in out and "samples/s" in out and str(tmp_path) in out
    assert "validation accuracy" in out


@pytest.mark.parametrize("workers", ["0"])
def test_demo_on_an_image_folder(tmp_path, workers):
    rng = np.random.default_rng(0)
    for cls, value in (("dark", 40), ("light", 210)):
        (tmp_path / "data" / cls).mkdir(parents=True)
        for i in range(120):
            pixels = np.clip(rng.normal(value, 20, (20, 20)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(tmp_path / "data" / cls / f"img.{i}.png")
    out = run_demo("--data", str(tmp_path / "data"), "--out", str(tmp_path / "shards"), "--epochs", "6",
                   "--workers", workers)
    assert (tmp_path / "shards" / "train-000000.tar").exists()
    last = [line for line in out.splitlines() if line.startswith("done:")][0]
    assert float(last.split("accuracy ")[1].split("%")[0]) >= 90.0  # two trivially separable classes


def test_without_torch_the_demo_names_the_install_command_and_writes_nothing(tmp_path):
    """Checked before anything is written: no shards in --out, no temporary folder, exit status 2."""
    block_torch = (
        "import sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "from shardstream.demo import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    for args in ([], ["--out", str(tmp_path / "out")]):
        r = subprocess.run([sys.executable, "-c", block_torch, "--samples", "50", *args], capture_output=True,
                           text=True, timeout=240, env={**os.environ, "TMPDIR": str(scratch)})
        assert r.returncode == 2, r.stdout + r.stderr
        assert "pip install 'shardstream[torch]'" in r.stderr and "make venv" in r.stderr
        assert "Traceback" not in r.stderr and "writing shards" not in r.stdout
        assert list(scratch.iterdir()) == [] and not (tmp_path / "out").exists()
