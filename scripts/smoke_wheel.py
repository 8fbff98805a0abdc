"""Smoke test of an installed shardstream: import it, write a small shard, read it back.

cibuildwheel runs it after building each platform wheel (``test-command`` in pyproject.toml), and
tests/test_packaging.py runs it in a fresh virtual environment for the wheels it builds::

    python scripts/smoke_wheel.py              # any build
    python scripts/smoke_wheel.py --accelerated  # and require the C header walk (platform wheels)
    python scripts/smoke_wheel.py --pure         # and require the pure-Python walk (py3-none-any wheel)

It prints one JSON line (version, where shardstream was imported from, whether the C walk is in use, the
samples read) and exits non-zero when anything is off.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--accelerated", action="store_true", help="require the C header walk")
    group.add_argument("--pure", action="store_true", help="require the pure-Python header walk")
    args = parser.parse_args(argv)

    import shardstream
    import shardstream.tar

    with tempfile.TemporaryDirectory() as tmp:
        shard = os.path.join(tmp, "smoke-000000.tar")
        with shardstream.TarWriter(shard) as sink:
            for i in range(20):
                sink.write({"__key__": f"{i:04d}", "cls": i, "txt": f"sample {i}", "json": {"i": i}})
        samples = list(shardstream.WebDataset(shard, shardshuffle=False).decode().to_tuple("cls", "txt", "json"))
    accelerated = shardstream.tar.accelerated()
    print(json.dumps({"version": shardstream.__version__, "file": shardstream.__file__,
                      "python": sys.version.split()[0], "accelerated": accelerated, "samples": len(samples)}))
    expected = [(i, f"sample {i}", {"i": i}) for i in range(20)]
    if samples != expected:
        print(f"smoke test: read back {samples[:3]}..., expected {expected[:3]}...", file=sys.stderr)
        return 1
    if (args.accelerated and not accelerated) or (args.pure and accelerated):
        want = "the C header walk" if args.accelerated else "the pure-Python header walk"
        print(f"smoke test: this build does not use {want} (shardstream.tar.accelerated() is {accelerated})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
