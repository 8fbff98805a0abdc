"""Issue 16's closing measurement: proportions measured vs the spec for a 3-source mix over 10 epochs, for the
exact mix of a spec (``spec_pipeline`` / ``WebDataset("spec.yaml")``) side by side with ``RandomMix`` (the same
sources and weights, proportions met only in expectation); and resume exactness (save mid-epoch, restore,
compare the rest sample by sample).

    python benchmarks/bench_spec_mixing.py

Prints two tables. No timings: counts only (tests/spec/test_exact_mix.py asserts the same properties).
"""

from __future__ import annotations

import collections
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))

from shardstream.pipeline import RandomMix  # noqa: E402
from shardstream.spec import spec_pipeline  # noqa: E402
from shardstream.testing import write_shards  # noqa: E402

SPEC = {"a": 0.5, "b": 0.3, "c": 0.2}
EPOCH = 3000
EPOCHS = 10


def make(folder: pathlib.Path) -> dict:
    sources = []
    for name, sizes in (("a", [800] * 3), ("b", [500] * 2), ("c", [300] * 2)):
        shards = write_shards(folder / name, sizes, {"src": name})
        sources.append({"name": name, "shards": shards, "proportion": SPEC[name]})
    return {"seed": 0, "epoch_size": EPOCH, "sources": sources}


def source(sample: dict) -> str:
    return sample["src"].decode()


def proportions(spec: dict) -> list[tuple[int, dict[str, float], dict[str, float]]]:
    exact = spec_pipeline(spec, shardshuffle=True)
    pipelines = [s for s in exact.datasets]  # the same endless per-source streams
    rows = []
    for epoch in range(EPOCHS):
        exact.set_epoch(epoch)
        got = collections.Counter(source(s) for s in exact)
        random_mix = RandomMix(pipelines, probs=[SPEC[k] for k in "abc"], seed=0)
        random_mix.set_epoch(epoch)
        it = iter(random_mix)
        drawn = collections.Counter(source(next(it)) for _ in range(EPOCH))
        rows.append((epoch, {k: got[k] / EPOCH for k in SPEC}, {k: drawn[k] / EPOCH for k in SPEC}))
    return rows


def resume(spec: dict, stops: list[int]) -> list[tuple[int, int, int]]:
    rows = []
    for stop in stops:
        first = spec_pipeline(spec, shardshuffle=True).shuffle(100)
        first.set_epoch(4)
        it = iter(first)
        for _ in range(stop):
            next(it)
        state = first.state_dict()
        rest = [(source(s), s["__key__"]) for s in it]
        again = spec_pipeline(spec, shardshuffle=True).shuffle(100)
        again.set_epoch(4)
        again.load_state_dict(state)
        restored = [(source(s), s["__key__"]) for s in again]
        same = sum(a == b for a, b in zip(rest, restored))
        rows.append((stop, len(rest), same if len(rest) == len(restored) else -1))
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = make(pathlib.Path(tmp))
        print(f"3-source mix, epoch of {EPOCH} samples, spec a/b/c = 0.5/0.3/0.2; measured share per epoch")
        print(f"{'epoch':>5} | {'exact a':>8} {'exact b':>8} {'exact c':>8} | {'random a':>8} {'random b':>8} "
              f"{'random c':>8}")
        worst = {"exact": 0.0, "random": 0.0}
        for epoch, exact, drawn in proportions(spec):
            print(f"{epoch:>5} | " + " ".join(f"{exact[k]:>8.4f}" for k in SPEC) + " | "
                  + " ".join(f"{drawn[k]:>8.4f}" for k in SPEC))
            worst["exact"] = max(worst["exact"], *(abs(exact[k] - SPEC[k]) for k in SPEC))
            worst["random"] = max(worst["random"], *(abs(drawn[k] - SPEC[k]) for k in SPEC))
        print(f"largest |measured - spec|: exact {worst['exact']:.4f}, RandomMix {worst['random']:.4f}\n")
        print("resume mid-epoch (epoch 4, shuffle(100) after the mix): save after `stop` samples, restore, compare")
        print(f"{'stop':>6} {'rest':>6} {'identical':>10}")
        for stop, rest, same in resume(spec, [1, 750, 1500, 2999]):
            print(f"{stop:>6} {rest:>6} {same:>10}")


if __name__ == "__main__":
    main()
