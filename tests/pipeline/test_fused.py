"""Fused batch plans (pipeline/stages/fused.py) against the chain of stages they replace, differentially.

Each case runs one pipeline twice, fused and with fusion turned off, and compares every batch (types, dtypes,
values), the error raised (type and message), the state after every batch, and the rest of the stream after
restoring each of those states.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from pipeline_data import describe, fused_or_not

import shardstream as wds
from shardstream.pipeline import (
    DataPipeline,
    batched,
    decode,
    ignore_and_continue,
    ignore_and_stop,
    map_tuple,
    reraise_exception,
    to_tuple,
    warn_and_continue,
)
from shardstream.pipeline.stages import fused
from shardstream.pipeline.stages.batching import default_collation_fn
from shardstream.testing import write_shards


def _sample(rng: random.Random, i: int):
    """A sample, clean most of the time, else one of the things the fused loop must leave to the stages."""
    s = {"__key__": f"k{i}", "__url__": "u", "txt": f"text {i}".encode(), "cls": str(i % 7).encode()}
    kind = rng.random()
    if kind < 0.7:
        return s
    variant = rng.randrange(15)
    if variant == 0:
        s["txt"] = b"\xff\xfe"  # not UTF-8
    elif variant == 1:
        s["cls"] = b"x1"  # not an integer
    elif variant == 2:
        del s["cls"]
    elif variant == 3:
        s["json"] = b'{"a": 1}'
    elif variant == 4:
        s["json"] = b"{broken"
    elif variant == 5:
        s["txt"] = memoryview(s["txt"])
    elif variant == 6:
        s["cls"] = None
    elif variant == 7:
        s["__key__"] = b"k-bytes"
    elif variant == 8:
        s["cls"] = b" 12 "
    elif variant == 9:
        s = (s["txt"], s["cls"])  # not a dict
    elif variant == 10:
        s["__local_path__"] = "/data/u.tar"  # metadata the decoder passes through
    elif variant == 11:
        s["__extra__"] = b"\xff meta bytes"
    elif variant == 12:
        s[7] = b"1"  # a key the decoder cannot resolve
    elif variant == 13:
        del s["cls"]  # as many keys as a clean sample, one field fewer
        s["__local_path__"] = "/data/u.tar"
    else:
        del s["__url__"]  # as many keys as a clean sample, one field more
        s["json"] = b"[1]"
    return s


HANDLERS = [reraise_exception, warn_and_continue, ignore_and_continue, ignore_and_stop]


def _chain(rng: random.Random):
    stages = []
    use_decode = rng.random() < 0.6
    if use_decode:
        stages.append(decode(handler=rng.choice(HANDLERS)) if rng.random() < 0.7 else decode())
    fields = rng.choice([("txt", "cls"), ("cls",), ("txt cls",), ("cls", "txt"), ("txt", "json")])
    kw = {"handler": rng.choice(HANDLERS)} if rng.random() < 0.7 else {}
    if rng.random() < 0.2:
        kw["missing_is_error"] = False
    stages.append(to_tuple(*fields, **kw))
    if rng.random() < 0.5 or not use_decode:
        fs = rng.choice([(bytes.decode, int), (None, int), (int,), (str, None), (bytes.decode, int, int)])
        if use_decode:
            fs = rng.choice([(str, None), (None, float), (len, None)])  # on decoded values
        stages.append(map_tuple(*fs, handler=rng.choice(HANDLERS)))
    stages.append(batched(rng.choice([1, 2, 3, 5]), partial=rng.random() < 0.7))
    return stages


@pytest.mark.parametrize("seed", range(120))
def test_fused_equals_chain_on_random_samples_and_chains(seed, monkeypatch):
    rng = random.Random(seed)
    clean = rng.random() < 0.3
    samples = [_sample(rng, i) if not clean else _sample(random.Random(0), i) for i in range(rng.randrange(0, 23))]
    stages = _chain(rng)

    def make():
        return DataPipeline(tuple(samples), *stages)

    fused_run, chain_run = fused_or_not(make, False, monkeypatch), fused_or_not(make, True, monkeypatch)
    assert fused_run == chain_run


def test_the_readme_idioms_are_fused_and_equal_on_shards(tmp_path, monkeypatch):
    paths = write_shards(tmp_path, [7, 0, 12, 5])
    makers = [
        lambda: wds.WebDataset(paths, shardshuffle=False).decode().to_tuple("txt", "cls").batched(4),
        lambda: wds.WebDataset(paths, shardshuffle=False).to_tuple("txt", "cls").map_tuple(bytes.decode, int)
        .batched(4),
        lambda: wds.WebDataset(paths, shardshuffle=3, seed=5).decode().to_tuple("txt", "cls").batched(5,
                                                                                                  partial=False),
    ]
    calls, slow = [], []
    real, real_slow = fused._Plan.__call__, fused._Plan.slow
    monkeypatch.setattr(fused._Plan, "__call__", lambda self, source: (calls.append(1), real(self, source))[1])
    monkeypatch.setattr(fused._Plan, "slow", lambda self, sample: (slow.append(sample), real_slow(self, sample))[1])
    for make in makers:
        calls.clear()
        first = fused_or_not(make, False, monkeypatch)
        assert calls, "the idiom was not fused"
        assert slow == [], "clean samples (with __local_path__) left the fast loop"
        assert first == fused_or_not(make, True, monkeypatch)
        assert sum(len(b[1][1][2]) for b in first[0]) in (24, 20)
        slow.clear()


def test_unrecognised_runs_keep_their_stages():
    makes = [object(), object(), object()]
    items = [decode("pil"), to_tuple("jpg"), batched(2)]  # decode stays; to_tuple + batched alone are fused
    kept = fused.fuse(items, makes)
    assert len(kept) == 2 and kept[0] is makes[0] and isinstance(kept[1], fused._Plan)
    items = [to_tuple("txt"), map_tuple(lambda b: b), batched(2)]  # not a known pure function
    assert fused.fuse(items, makes) == makes
    items = [to_tuple("txt"), batched(2, collation_fn=None)]
    assert fused.fuse(items, makes[:2]) == makes[:2]
    items = [to_tuple("jpg;png"), batched(2)]
    assert fused.fuse(items, makes[:2]) == makes[:2]


@pytest.mark.parametrize("handler", HANDLERS)
@pytest.mark.parametrize("idiom", ["decode", "map_tuple"])
def test_hostile_shards_read_in_chunks_match_the_chain(tmp_path, monkeypatch, handler, idiom):
    """Shards whose C chunks hold rows the fast loop cannot make: the samples after a stop are given back."""
    bad = {5, 6, 17, 30}

    def txt(shard, index, number):
        return b"\xff not utf-8" if number in bad else f"text {number}"

    def cls(shard, index, number):
        return b"seven" if number == 23 else number % 10

    paths = write_shards(tmp_path, [9, 14, 11], {"txt": txt, "cls": cls})

    def make():
        ds = wds.WebDataset(paths, shardshuffle=False)
        if idiom == "decode":
            return ds.decode(handler=handler).to_tuple("txt", "cls", handler=handler).batched(4)
        return ds.to_tuple("txt", "cls").map_tuple(bytes.decode, int, handler=handler).batched(4)

    assert fused_or_not(make, False, monkeypatch) == fused_or_not(make, True, monkeypatch)


class _Chunks:
    """A source that hands out several samples at a time, in chunks of ``size`` (as the shard reader does)."""

    def __init__(self, items, size):
        self.items, self.size, self.i = list(items), size, 0

    def take(self, n):
        end = min(self.i + n, (self.i // self.size + 1) * self.size, len(self.items))
        out, self.i = self.items[self.i:end], end
        return out

    def give_back(self, n):
        self.i -= n

    def __iter__(self):
        return iter(self.items[self.i:])


def _outcome(batches):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for batch in batches:
                out.append(describe(batch))
        except Exception as exn:  # noqa: BLE001 - compared between the two runs
            out.append((type(exn).__name__, str(exn)))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_fused_chunks_equal_the_chain(seed):
    """Chunks of many samples, mostly clean, some not: the chunk-at-a-time checks leave exactly the rows the
    stages must make to them, and what the loop does not take is given back."""
    rng = random.Random(seed)
    samples = [_sample(rng, i) if rng.random() < 0.3 else _sample(random.Random(0), i) for i in range(40)]
    makes: list = []
    while len(makes) != 1:  # a chain that fuses whole
        stages = _chain(rng)
        makes = fused.fuse(stages, [None] * len(stages))
    source = _Chunks(samples, rng.choice([3, 8, 64]))
    fast = _outcome(makes[0](source))
    chain = iter(samples)
    for stage in stages:
        chain = stage(chain)
    assert fast == _outcome(chain)
    rest = list(source)
    assert rest == samples[len(samples) - len(rest):]


def _keep_even(sample):
    return sample if int(sample["cls"]) % 2 == 0 else None


@pytest.mark.parametrize("middle", ["map", "select", "lambda"])
def test_a_stage_in_between_is_not_fused_over(middle, tmp_path, monkeypatch):
    """A stage that needs the samples between the field-wise stages and ``batched`` keeps the run apart: what
    comes before it is not fused with what comes after it, and the outputs are the chain's."""
    paths = write_shards(tmp_path, [6, 9])
    between = {"map": wds.map(_keep_even), "select": wds.select(lambda s: s[1] % 3 != 0),
               "lambda": map_tuple(lambda t: t.upper(), None)}[middle]
    if middle == "map":
        stages = [decode(), between, to_tuple("txt", "cls"), batched(4)]
        fusable = [False, False, True]  # decode | map | to_tuple + batched (fused: map comes before it)
    elif middle == "select":
        stages = [decode(), to_tuple("txt", "cls"), between, batched(4)]
        fusable = [False, False, False, False]
    else:
        stages = [decode(), to_tuple("txt", "cls"), between, batched(4)]
        fusable = [False, False, False, False]
    makes = fused.fuse(stages, list(range(len(stages))))
    assert [isinstance(m, fused._Plan) for m in makes] == fusable

    def make():
        return DataPipeline(wds.SimpleShardList(paths), wds.tarfile_to_samples(), *stages)

    first = fused_or_not(make, False, monkeypatch)
    assert first[0] and first[2] is None  # batches, no error
    assert first == fused_or_not(make, True, monkeypatch)


@pytest.mark.parametrize("column", [["a", "b"], [b"a", b"b"], [1, 2], [1.5, 2], [True, False], [1, "x"], ["x", 1],
                                    [np.int8(1), np.int8(2)], [None, 1], [2**70, 1]])
def test_the_fused_collation_is_the_default_one(column):
    rows = [(v, i) for i, v in enumerate(column)]
    try:
        expected = describe(default_collation_fn(rows))
    except Exception as exn:  # noqa: BLE001 - compared
        expected = (type(exn).__name__, str(exn))
    try:
        got = describe(fused._Plan.collate([list(column), list(range(len(column)))]))
    except Exception as exn:  # noqa: BLE001
        got = (type(exn).__name__, str(exn))
    assert got == expected


def test_the_speed_a_chain_runs_at_is_logged(caplog, tmp_path):
    """A DEBUG record (logger ``shardstream.pipeline``) names each cursor of a new chain and the stages chained as
    generators; another, each fused plan as it starts and whether the reader's C walk gives it columns."""
    caplog.set_level("DEBUG", logger="shardstream.pipeline")
    rows = tuple({"__key__": str(i), "txt": b"t", "cls": b"1"} for i in range(3))
    assert len(list(DataPipeline(rows, decode(), to_tuple("txt", "cls"), batched(2)))) == 2
    shards = write_shards(tmp_path, [4])
    assert len(list(wds.WebDataset(shards, shardshuffle=False).decode().to_tuple("txt", "cls").batched(2))) == 2
    said = [r.getMessage() for r in caplog.records if r.name.startswith("shardstream.pipeline")]
    assert "DataPipeline epoch 0: IndexCursor -> generators [stage 1 (decode), stage 2 (to_tuple), stage 3 (batched)]" \
        in said
    assert "fused plan ['decode', 'to_tuple', 'batched']: one loop over samples" in said
    assert any(m.startswith("WebDataset epoch 0: ReplayCursor -> ReaderCursor (stage 3 (tarfile_to_samples)) -> ")
               for m in said)
    if fused.MAX_WANTED:  # the C extension is built
        assert "fused plan ['decode', 'to_tuple', 'batched']: one loop over columns from the reader's C walk where " \
               "samples fit" in said
