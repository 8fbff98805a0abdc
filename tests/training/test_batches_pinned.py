"""The batches of ``TrainingDataset`` are pinned: the same seed gives the same samples, fields, types and batches
as the code before the batch gather (issue 17; the digests below were computed with that code, commit b5a300d).

The data mixes the cases a fast path could get wrong: shards whose samples all have the same fields, shards
where they differ (a missing field, an extra one, an empty one, other field orders), a non-ASCII key, and one
sample per shard in the last shard. Each case digests every batch (field names in order, value types, values).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from shardstream.indexed import IndexedDataset
from shardstream.training import TrainingDataset
from shardstream.writer import TarWriter


def _samples():
    n = 0
    for shard, size in enumerate([23, 17, 30, 1, 19, 13]):
        for i in range(size):
            key = f"s{n:04d}" if n != 40 else "clé-40"
            sample = {"__key__": key, "txt": f"text {n} " * (n % 5), "cls": n}
            if shard == 1 and i % 4 == 1:
                del sample["cls"]
            if shard == 2 and i % 7 == 3:
                sample["json"] = {"n": n}
            if shard == 2 and i % 9 == 0:
                sample = {"__key__": key, "cls": n, "txt": ""}
            if shard == 4:
                sample = {"__key__": key, "bin": bytes(range(n % 256)) * 3, "cls": n}
            if shard == 5:  # the fields of shard 0 in the other order
                sample = {"__key__": key, "cls": n, "txt": f"other {n}"}
            yield shard, sample
            n += 1


def write_mixed(folder) -> list[str]:
    paths: list[str] = []
    current, sink = -1, None
    for shard, sample in _samples():
        if shard != current:
            if sink is not None:
                sink.close()
            current = shard
            paths.append(str(folder / f"pin-{shard:02d}.tar"))
            sink = TarWriter(paths[-1])
        sink.write(sample)
    sink.close()
    return paths


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return write_mixed(tmp_path_factory.mktemp("pinned"))


def _canon(value):
    if isinstance(value, dict):
        return ("dict", [(k, _canon(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_canon(v) for v in value])
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, memoryview):
        return ("memoryview", bytes(value))
    return (type(value).__name__, value)


def digest(batches, folder: str) -> str:
    """A digest of the batches, the shards' folder left out of the URLs."""
    text = repr([_canon(b) for b in batches]).replace(folder, "<folder>")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _epochs(ds, epochs=2):
    out = []
    for _ in range(epochs):
        out.extend(ds)
    return out


def cases(paths):
    def ds(**kw):
        kw.setdefault("batch_size", 7)
        kw.setdefault("seed", 3)
        return TrainingDataset(kw.pop("source", paths), **kw)

    yield "global raw lists", lambda: _epochs(ds(collate=None))
    same = [paths[0], paths[3], paths[5]]  # samples with the same fields: they collate
    yield "global collated", lambda: _epochs(ds(source=same))
    yield "global decoded", lambda: _epochs(ds(source=same, decode=True))
    yield "global decoded, batch 100", lambda: _epochs(ds(source=same, decode=True, batch_size=100))
    yield "global decoded lists, batch 100", lambda: _epochs(ds(decode=True, collate=None, batch_size=100))
    yield "global mapped", lambda: _epochs(ds(collate=None, map=lambda s: sorted(s)))
    for world in (2, 3):
        for drop_last in (False, True):
            yield (f"global world {world} drop_last {drop_last}",
                   lambda world=world, drop_last=drop_last: [
                       b for r in range(world)
                       for b in _epochs(ds(collate=None, rank=r, world_size=world, drop_last=drop_last))])
    yield "window", lambda: _epochs(ds(collate=None, shuffle="window", window=2))
    yield "window collated", lambda: _epochs(ds(source=same, shuffle="window", window=2))
    yield "stream", lambda: _epochs(ds(collate=None, shuffle="stream", window=2, buffer=10))
    yield "none", lambda: _epochs(ds(collate=None, shuffle="none"))
    yield "zero-copy source", lambda: _epochs(ds(source=IndexedDataset(paths, zero_copy=True), collate=None))
    yield "decoding source", lambda: _epochs(ds(source=IndexedDataset(same, decode=True)))
    yield "decoding source lists", lambda: _epochs(ds(source=IndexedDataset(paths, decode=True), collate=None))

    def resumed():
        first = ds(collate=None, rank=0, world_size=2)
        it = iter(first)
        head = [next(it) for _ in range(2)]
        state = first.state_dict()
        tails = []
        for r in range(3):  # elastic: 2 ranks -> 3
            again = ds(collate=None, rank=r, world_size=3)
            again.load_state_dict(state)
            tails.extend(again)
        return head + tails

    yield "elastic resume", resumed


PINNED = {
    'global raw lists': '48ce175ec60f9142',
    'global collated': 'f7b6aa9b165a7673',
    'global decoded': 'ac4e492df6ef4031',
    'global decoded, batch 100': 'd653f32c83ee0863',
    'global decoded lists, batch 100': 'd11427cf6a3f3902',
    'global mapped': '108836be00aefbf3',
    'global world 2 drop_last False': '9055eca7193bf22d',
    'global world 2 drop_last True': '831ed9814aa5f179',
    'global world 3 drop_last False': 'd21ffcbb7b71fb58',
    'global world 3 drop_last True': 'e2150ffec0359801',
    'window': '01f73bd58993c205',
    'window collated': 'b541f8e5d5f8d6db',
    'stream': '02d88a7a19cdfc15',
    'none': '7018212cf5212b72',
    'zero-copy source': 'f0c105cf09158b36',
    'decoding source': 'ac4e492df6ef4031',
    'decoding source lists': '6793b2ac22e77986',
    'elastic resume': '6bd99a16d7a04619',
}


def test_batches_are_pinned(mixed):
    folder = os.path.dirname(mixed[0])
    got = {name: digest(make(), folder) for name, make in cases(mixed)}
    assert set(got) == set(PINNED)
    assert got == PINNED


if __name__ == "__main__":  # print the digests of the code in use (to pin them once)
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, make in cases(write_mixed(pathlib.Path(tmp))):
            print(f"    {name!r}: {digest(make(), tmp)!r},")
