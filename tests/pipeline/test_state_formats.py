"""The states that pipelines save keep their format: a checkpoint written by an earlier version still loads.

``STATE_DIGESTS`` holds the SHA-256 of every state the cases below saved (canonical JSON) with shardstream at
d054ac7, before the stateful stages became their cursor classes (issue 27). The same pipelines must save the very
same states now, byte for byte: then every checkpoint that version wrote loads here as it did there (the round trip
below checks that loading one goes on with the same items). Regenerate only for a deliberate format change (with a
new envelope version): ``python tests/pipeline/test_state_formats.py``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile

import pytest

from shardstream import WebDataset
from shardstream.indexed import indexed_shard_writer
from shardstream.pipeline import (
    DataPipeline,
    batched,
    check_empty,
    detshuffle,
    repeat,
    rsample,
    shuffle,
    slice,
    split_by_node,
    split_by_worker,
    tarfile_to_samples,
    unbatched,
    unlisted,
    with_epoch,
)
from shardstream.pipeline.shardlists import SimpleShardList

STATE_DIGESTS = {
    "items": [
        "b40bfe8da2e162bb", "6f4c4cb2ca9f8411", "11e28c993943c340", "a0b4c8a7e6b9d718", "94dfa335d9cda1ab",
        "4f966822214d0a08", "9927ec9e0610902f",
    ],
    "lists": [
        "9917e9dc976f062a", "4dac81c72e7480fc", "8681ff7e80e4156e", "457bf874886787bb", "06612cd0d537088d",
        "13f6e7273fffda5e", "821348889823a82b", "86fbb44007051a23", "087938c1588d2332",
    ],
    "repeat": [
        "6beb091deb1e8c9c", "165aac1b77b9afc5", "f21345201ef278fa", "48ca177c984726d5", "9dead4b9f9dcf2bc",
        "19d7b3d55d881b3e", "0182df7d213f34ce", "489925084d85bcd9",
    ],
    "shards": [
        "692ac158f05e8f9e", "057885eeba1aae06", "5332ce23c282abba", "5f69428fb7f9ea28", "3295d8ce785ad675",
        "5802a65f24215cbd", "2492217e5afc1fc5", "e088ab45f2ec3506",
    ],
    "rank-1-of-2": [
        "bbdb840798b5dc21", "fe4ab52c63016e4a", "70b42d243ba2a191", "4ed60cac838b871e", "17fc34d5afc79350",
        "039909bf393b1a8a", "181809de5c0fe73a",
    ],
    "equalize": [
        "079337713a38a7b8", "f426f4f8c30bed2d", "c1dfdbd7ef321a5e", "69f1b919ab6bd751", "ceb045bb0b577568",
        "81b9292ee9bf9065",
    ],
    "webdataset": [
        "722004488d18fdda", "65d85f78d056adfd", "a3aa363e964dab90", "c61db174aa8a0e95", "921c116c92cb3b29",
        "442d32b0e0184586", "dd03a146a4d2dacf", "d9589e7e30ce03ea",
    ],
}


def _write_shards(count: int = 4, samples: int = 5) -> list[str]:
    """Small shards in the current directory (relative names: the states do not depend on where they are)."""
    names = []
    for s in range(count):
        name = f"shard-{s}.tar"
        with tarfile.open(name, "w") as tf:
            for i in range(samples):
                for ext, data in (("txt", f"s{s}i{i}".encode()), ("cls", str(i % 3).encode())):
                    info = tarfile.TarInfo(f"s{s}_{i:03d}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
        names.append(name)
    return names


def make(case: str) -> DataPipeline:
    """One pipeline per case; together they use every stage that keeps state."""
    if case == "items":
        return DataPipeline(tuple(range(40)), shuffle(8, 3), slice(1, 35, 2), rsample(0.7),
                            batched(3, collation_fn=None), unlisted(), seed=3)
    if case == "lists":
        return DataPipeline(tuple([[i, -i] for i in range(12)]), unlisted(), detshuffle(5, 2, seed=2, epoch=1),
                            batched(4), unbatched(), with_epoch(30), seed=1)
    if case == "repeat":
        return DataPipeline(tuple(range(7)), shuffle(3, 3), repeat(2), seed=5)
    urls = _write_shards()
    if case == "shards":
        return DataPipeline(SimpleShardList(urls), shuffle(10, 10), split_by_node, split_by_worker,
                            tarfile_to_samples(), check_empty(), shuffle(6, 2), seed=4)
    if case == "rank-1-of-2":  # the node splitter keeps every other shard
        return DataPipeline(SimpleShardList(urls), split_by_node, tarfile_to_samples(), seed=4)
    if case == "equalize":  # rank 1 of 2, shards of 3, 5, 4, 6 samples (sidecar indexes): equal shares
        with indexed_shard_writer("part-%d.tar", maxcount=100) as sink:
            for shard, size in enumerate((3, 5, 4, 6)):
                if shard:
                    sink.next_stream()
                for i in range(size):
                    sink.write({"__key__": f"p{shard}_{i:03d}", "cls": i})
        return WebDataset(sink.shards, shardshuffle=False, equalize=True, seed=1).shuffle(3)
    if case == "webdataset":
        return WebDataset(urls, shardshuffle=True, seed=2).shuffle(4).decode().to_tuple("txt", "cls")
    raise KeyError(case)


def states(case: str) -> list[str]:
    """The states the pipeline of ``case`` saves before it starts, after 1, 2, 3, 5, 8... items and at its end,
    as canonical JSON."""
    pipeline = make(case)
    pipeline.set_epoch(1)
    saved = [pipeline.state_dict()]
    it, n = iter(pipeline), 0
    while True:
        try:
            next(it)
        except StopIteration:
            break
        n += 1
        if n in (1, 2, 3, 5, 8, 13, 21, 34):
            saved.append(it.state_dict())
    saved.append(pipeline.state_dict())
    return [json.dumps(state, sort_keys=True) for state in saved]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.fixture()
def placed(request, monkeypatch, tmp_path):
    """In a fresh directory; ``rank-1-of-2`` runs as rank 1 of 2 (settings come from the environment)."""
    monkeypatch.chdir(tmp_path)
    if request.param in ("rank-1-of-2", "equalize"):
        monkeypatch.setenv("RANK", "1")
        monkeypatch.setenv("WORLD_SIZE", "2")
    return request.param


@pytest.mark.parametrize("placed", sorted(STATE_DIGESTS), indirect=True)
def test_states_are_saved_as_before(placed):
    assert [digest(text) for text in states(placed)] == STATE_DIGESTS[placed]


@pytest.mark.parametrize("placed", sorted(STATE_DIGESTS), indirect=True)
def test_a_saved_state_goes_on_with_the_same_items(placed):
    whole = make(placed)
    whole.set_epoch(1)
    items = [repr(item) for item in whole]
    for text in states(placed)[1:-1]:
        state = json.loads(text)
        pipeline = make(placed)
        pipeline.load_state_dict(state)
        rest = [repr(item) for item in pipeline]
        assert rest == items[len(items) - len(rest):] and rest


if __name__ == "__main__":  # print the digests of this checkout (see the module docstring)
    import tempfile

    found = {}
    for case in STATE_DIGESTS:
        with tempfile.TemporaryDirectory() as where:
            os.chdir(where)
            if case in ("rank-1-of-2", "equalize"):
                os.environ.update(RANK="1", WORLD_SIZE="2")
            found[case] = [digest(text) for text in states(case)]
            os.environ.pop("RANK", None), os.environ.pop("WORLD_SIZE", None)
    json.dump(found, sys.stdout, indent=4)
