"""Cases from webdataset 1.0.2's own tests (tests/test_loaders.py, test_compat.py, test_shuffles.py,
test_security.py) that code written for it still meets, run under both libraries on the same shard.

webdataset's tests read ``testdata/imagenet-000000.tgz`` (one gzipped shard of 47 samples); the fixture writes one
like it. Each test runs the same code with ``lib`` = webdataset and shardstream; where shardstream says more (a
typed error, a longer message), it says it on top of what webdataset does.
"""

from __future__ import annotations

import gzip
import importlib
import io
import pickle
import re
import tarfile

import numpy as np
import pytest
from raising import raised

W = pytest.importorskip("webdataset")

import shardstream as S  # noqa: E402
from shardstream.config import SECURE_REFUSALS  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]
LIBS = pytest.mark.parametrize("lib", [W, S], ids=["webdataset", "shardstream"])
SAMPLES = 47


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> str:
    """One gzipped shard of 47 samples (``bin``: 3000 incompressible bytes, ``cls``: a label), like the shard of
    webdataset's tests: its first 10 KiB hold only the first few samples."""
    rng = np.random.default_rng(28)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        for i in range(SAMPLES):
            for ext, data in (("bin", rng.bytes(3000)), ("cls", str(i % 10).encode())):
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    path = tmp_path_factory.mktemp("own") / "imagenet-000000.tgz"
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return str(path)


def count(source) -> int:
    return sum(1 for _ in source)


# -- empty_check=False: a DataLoader worker without shards yields nothing (tests/test_loaders.py) --------------------

@pytest.mark.timeout(300)
@LIBS
def test_empty_check_false_lets_workers_without_shards_yield_nothing(shard, lib):
    """One shard, four workers: three get no shard. With ``empty_check=False`` they yield nothing (webdataset's
    test_webloader_repeat and test_webloader_unbatched); by default it is a ``ValueError``
    (test_check_empty_throws_ValueError), shardstream's a :class:`~shardstream.errors.WorkerSplitError`."""
    pytest.importorskip("torch")
    ds = lib.WebDataset(shard, empty_check=False, shardshuffle=False).decode().to_tuple("cls")
    assert count(lib.WebLoader(ds, num_workers=4, batch_size=3).repeat(nepochs=2)) == 2 * (SAMPLES + 2) // 3
    assert count(lib.WebLoader(ds, num_workers=4, batch_size=3).unbatched()) == SAMPLES
    checked = lib.WebDataset(shard, shardshuffle=False).decode().to_tuple("cls")
    error = raised(ValueError, lib.WebLoader(checked, num_workers=4, batch_size=3).repeat(nepochs=2))
    assert "hard" in str(error) or "samples" in str(error)
    if lib is S:  # the worker's error, re-raised by the DataLoader, names the fixes
        assert isinstance(error, S.WorkerSplitError) and "num_workers=1" in str(error)


# -- a missing field is a ValueError (tests/test_compat.py, tests/test_filters.py) -----------------------------------

MISSING = {
    "to_tuple": lambda ds: ds.to_tuple("foo", "bar"),  # test_dataset_missing_totuple_raises
    "rename": lambda ds: ds.rename(x="foo", y="bar"),  # test_dataset_missing_rename_raises
    "rename_one": lambda ds: ds.rename(image="missing", cls="cls"),  # test_dataset_rename_handler
    "rename_keep_false": lambda ds: ds.rename(image="missing;foo", keep=False),
    "to_tuple_batched": lambda ds: ds.decode().to_tuple("cls", "foo").batched(4),  # shardstream's fused plan
}


@LIBS
@pytest.mark.parametrize("case", sorted(MISSING))
def test_a_missing_field_is_a_value_error(shard, lib, case):
    with pytest.raises(ValueError) as caught:
        count(MISSING[case](lib.WebDataset(shard, shardshuffle=100)))
    if lib is S:  # shardstream's error is a ValueError with more to say: the fields the sample has
        assert isinstance(caught.value, S.MissingFieldError)
        assert "sample has no field" in str(caught.value) and "'bin', 'cls'" in str(caught.value)


@LIBS
def test_the_filters_raise_value_errors_for_missing_and_none_fields(lib):
    """tests/test_filters.py's test_to_tuple_missing_key and test_to_tuple_none_value, through the public names."""
    with pytest.raises(ValueError):
        list(lib.filters.to_tuple("b")([{"a": 1}]))
    with pytest.raises(ValueError):
        list(lib.filters.to_tuple("a", none_is_error=True)([{"a": None}]))
    with pytest.raises(ValueError):
        lib.filters.getfirst({"a": 1}, "b")
    assert list(lib.filters.to_tuple("b", missing_is_error=False)([{"a": 1}])) == [(None,)]


def test_missing_field_error_is_webdatasets_type():
    assert issubclass(S.MissingFieldError, ValueError) and issubclass(S.MissingFieldError, S.SampleFormatError)


# -- detshuffle().epoch (tests/test_shuffles.py) -----------------------------------------------------------------------

@LIBS
def test_detshuffle_epoch(lib):
    """webdataset's test_detshuffle: the same order for the same epoch, another for the next; the stage tells the
    epoch of its latest iteration."""
    dataset1 = lib.DataPipeline(lib.SimpleShardList("{000000..000999}"), lib.detshuffle(10))
    result1 = list(iter(dataset1))
    dataset2 = lib.DataPipeline(lib.SimpleShardList("{000000..000999}"), lib.detshuffle(10))
    assert dataset2.stage(1).epoch == -1  # before any iteration: the epoch argument
    result2 = list(iter(dataset2))
    assert result1 == result2
    result22 = list(iter(dataset2))
    assert result22 != result2
    result12 = list(iter(dataset1))
    assert result12 == result22
    assert dataset2.stage(1).epoch == 1


def test_detshuffle_epoch_survives_copies():
    """A pipeline goes to DataLoader workers pickled: the stage stays a detshuffle with its epoch."""
    stage = S.detshuffle(bufsize=10, seed=3)
    list(S.DataPipeline(range(20), stage))
    copy = pickle.loads(pickle.dumps(stage))
    assert type(copy) is type(stage) and copy.epoch == stage.epoch == 0 and copy.arguments == stage.arguments
    assert stage.replace(bufsize=5).epoch == -1 and type(stage.replace(bufsize=5)) is type(stage)
    assert S.detshuffle(10, epoch=4).epoch == 4
    fixed = S.detshuffle(10, epoch=4)
    list(S.DataPipeline(range(20), fixed))
    assert fixed.epoch == 4  # a given epoch is the one the shuffle draws with


# -- secure mode keeps webdataset's words (tests/test_security.py) ----------------------------------------------------

def _refusals(lib, tmp_path, monkeypatch) -> dict[str, BaseException]:
    """What each of webdataset's secure-mode checks raises under ``lib`` (secure mode on; URL rewriting from the
    environment only for the rewriting case, as in webdataset's tests)."""
    gopen = importlib.import_module(f"{lib.__name__}.gopen")
    autodecode = importlib.import_module(f"{lib.__name__}.autodecode")
    local = tmp_path / "local.txt"
    local.write_text("test content")
    calls = {
        "command": lambda: gopen.gopen("pipe:echo 'hello world'", "rb"),
        "local": lambda: gopen.gopen(str(local), "rb"),
        "local file:": lambda: gopen.gopen(f"file://{local}", "rb"),
        "rewrite": lambda: gopen.rewrite_url("http://example.com/test.txt"),
        "unpickle": lambda: autodecode.unpickle_loads(pickle.dumps({"test": "data"})),
    }
    found = {}
    for name, call in calls.items():
        with monkeypatch.context() as patch, pytest.raises(ValueError) as caught:
            if name == "rewrite":
                patch.setenv("GOPEN_REWRITE", "http://example.com/=http://redirected.com/")
            call()
        found[name] = caught.value
    return found


def test_secure_mode_errors_keep_webdatasets_words(monkeypatch, tmp_path):
    monkeypatch.setattr(W.utils, "enforce_security", True)
    monkeypatch.setattr(S.utils, "enforce_security", True)
    theirs, ours = _refusals(W, tmp_path, monkeypatch), _refusals(S, tmp_path, monkeypatch)
    for name, error in theirs.items():
        assert str(ours[name]).startswith(str(error)), name  # their words first, then ours
        assert str(error) == SECURE_REFUSALS[name.split()[0]]
        assert "secure mode" in str(ours[name]) and "unset" in str(ours[name])
    monkeypatch.setattr(S.utils, "enforce_security", False)  # test_url_rewriting_allowed_when_security_disabled
    monkeypatch.setenv("GOPEN_REWRITE", "http://example.com/=http://redirected.com/")
    assert importlib.import_module("shardstream.gopen").rewrite_url(
        "http://example.com/test.txt") == "http://redirected.com/test.txt"


def test_secure_mode_refusals_of_shardstreams_own_checks_start_alike(monkeypatch):
    """The checks webdataset does not have (gopen.Pipe, a Decoder that may unpickle, xdecode's pickle decoder,
    LMDBCached with pickle) use the same words."""
    monkeypatch.setattr(S.utils, "enforce_security", True)
    calls = [lambda: importlib.import_module("shardstream.gopen").Pipe(["true"], mode="rb"),
             lambda: S.Decoder(allow_unsafe=True), lambda: S.filters.decode_pickle(io.BytesIO(pickle.dumps(1)))]
    for call in calls:
        with pytest.raises(ValueError) as caught:
            call()
        assert any(str(caught.value).startswith(words) for words in SECURE_REFUSALS.values()), str(caught.value)
    pytest.importorskip("lmdb")
    with pytest.raises(ValueError, match=re.escape(SECURE_REFUSALS["unpickle"])):
        S.LMDBCached("never-created")


# -- a truncated shard: the eof cases (tests/test_compat.py) -----------------------------------------------------------

@LIBS
def test_a_truncated_shard_raises_a_read_error_or_goes_to_the_handler(shard, lib):
    """test_dataset_eof: the first 10 KiB of the shard, through a pipe, is a ``tarfile.ReadError``;
    test_dataset_eof_handler: with ``ignore_and_stop`` the samples before the cut come out, and no error."""
    url = f"pipe:dd if={shard} bs=1024 count=10 2>/dev/null"
    with pytest.raises(tarfile.ReadError):
        count(lib.WebDataset(url, shardshuffle=100).shuffle(5))
    assert 0 < count(lib.WebDataset(url, handler=lib.ignore_and_stop, shardshuffle=100)) < SAMPLES


def test_the_handled_eof_gives_the_same_samples_in_both(shard):
    url = f"pipe:dd if={shard} bs=1024 count=10 2>/dev/null"
    theirs, ours = ([s["__key__"] for s in lib.WebDataset(url, handler=lib.ignore_and_stop, shardshuffle=False)]
                    for lib in (W, S))
    assert ours == theirs and len(ours) >= 1


# -- LMDBCached (filters.LMDBCached, the fluid lmdb_cached) ----------------------------------------------------------

def test_lmdb_cached_stores_the_first_pass_and_replays_it(shard, tmp_path):
    """The first pass reads the shard and stores its samples, the next ones replay them from the LMDB file (in the
    file's key order, as webdataset's do): the same under both libraries."""
    pytest.importorskip("lmdb")

    def passes(lib):
        ds = lib.WebDataset(shard, shardshuffle=False).decode().lmdb_cached(str(tmp_path / lib.__name__))
        return [[(s["__key__"], s["cls"]) for s in ds] for _ in range(2)]

    theirs, ours = passes(W), passes(S)
    assert ours == theirs
    first, again = ours
    assert len(first) == SAMPLES and sorted(first) == again

    samples = [{"__key__": f"k{i:02d}", "cls": i} for i in range(23, 0, -1)]  # more than a chunk, keys descending
    cache = S.LMDBCached(str(tmp_path / "direct"), chunksize=10)
    assert not cache.is_complete()
    assert list(cache.run(iter(samples))) == samples and cache.is_complete()
    assert list(cache.run(iter([]))) == samples[::-1]  # replayed from the file, in key order
