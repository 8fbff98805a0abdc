"""Without torch, everything but the torch-specific pieces works and yields numpy batches.

A subprocess makes torch unimportable (a meta-path finder that refuses it), then uses the public API.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_TORCH = textwrap.dedent(
    """
    import sys

    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"No module named {name!r} (blocked by test_no_torch)")
            return None

    sys.meta_path.insert(0, _NoTorch())
    """
)

SCRIPT = BLOCK_TORCH + textwrap.dedent(
    """
    import io, os, tarfile, tempfile
    import numpy as np
    import shardstream as wds
    from shardstream.errors import MissingDependencyError
    from shardstream.testing import write_shards

    tmp = tempfile.mkdtemp()
    fields = {"npy": lambda shard, i, n: np.full((2, 3), i, np.float32), "cls": lambda shard, i, n: i, "txt": "x"}
    write_shards(tmp, [5, 5], fields, name="t-{shard}.tar", key="{shard}-{index}")

    url = os.path.join(tmp, "t-{0..1}.tar")
    ds = wds.WebDataset(url, shardshuffle=True, seed=0).shuffle(4).decode().to_tuple("npy", "cls", "txt").batched(4)
    assert not isinstance(ds, type) and type(ds).__mro__[-1] is object
    batches = list(ds)
    arrays, labels, texts = batches[0]
    assert type(arrays) is np.ndarray and arrays.shape == (4, 2, 3) and arrays.dtype == np.float32
    assert type(labels) is np.ndarray and texts == ["x"] * 4
    assert sorted(int(c) for b in batches for c in b[1]) == sorted(list(range(5)) * 2)

    pipeline = wds.DataPipeline(wds.SimpleShardList(url), wds.split_by_worker, wds.tarfile_to_samples(),
                                wds.decode(), wds.to_tuple("cls"), wds.batched(10))
    (only,) = list(pipeline)
    assert sorted(only[0].tolist()) == sorted(list(range(5)) * 2)

    try:
        wds.WebLoader(ds, batch_size=None)
    except MissingDependencyError as e:
        assert "shardstream[torch]" in str(e)
    else:
        raise AssertionError("WebLoader without torch should raise MissingDependencyError")
    assert "torch" not in sys.modules
    print("OK")
    """
)


def test_pipeline_without_torch():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


def test_importing_shardstream_does_not_import_torch():
    code = "import sys, shardstream; shardstream.TarWriter; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
