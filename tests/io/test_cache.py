"""The shard cache: names, download once across processes, verification, LRU eviction that spares readers."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import time

import pytest
from fault_servers import StubHTTP
from remote_servers import samples_of

from shardstream.errors import OpenError
from shardstream.io import register_opener, unregister_opener
from shardstream.io.cache import ShardCache, cache_opener

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


@pytest.fixture
def blobs():
    return {f"d/s{i}.tar": bytes([i]) * (100_000 + i) for i in range(5)}


@pytest.fixture
def stub(blobs):
    server = StubHTTP(blobs)
    yield server
    server.stop()


def cached_files(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


def partial_files(directory) -> list[str]:
    """Temporary files of downloads, in the folder or its subfolder of downloads in progress."""
    partial = os.path.join(directory, ".partial")
    return [n for d in (directory, partial) if os.path.isdir(d) for n in os.listdir(d) if n.endswith(".tmp")]


def test_names_come_from_the_whole_url_and_stay_readable(tmp_path):
    cache = ShardCache(str(tmp_path))
    a, b = cache.name_for("http://h/a/shard-0.tar"), cache.name_for("http://h/b/shard-0.tar")
    assert a != b and a.endswith(".tar") and "shard-0" in a and "a_shard-0" in a
    assert cache.name_for("http://h/a/shard-0.tar") == a  # stable
    assert cache.name_for("s3://bucket/x.tar.gz").endswith(".tar.gz")
    long = cache.name_for("https://h/" + "x" * 500 + ".tar")
    assert len(long) < 160 and not long.startswith(".")
    assert ShardCache(str(tmp_path), url_to_name=lambda u: "fixed.tar").name_for("http://h/a.tar") == "fixed.tar"


def test_first_read_downloads_then_reads_locally(tmp_path, stub, blobs):
    cache = ShardCache(str(tmp_path / "c"))
    url = stub.url("d/s1.tar")
    for _ in range(3):
        with cache(url) as f:
            assert f.read() == blobs["d/s1.tar"]
    assert stub.full_gets("d/s1.tar") == 1
    assert cached_files(tmp_path / "c") == [cache.name_for(url)]


def test_several_processes_download_a_shard_once(tmp_path, blobs):
    stub = StubHTTP(blobs, delay=0.5)  # slow server: the processes overlap while the first downloads
    script = ("import sys, hashlib; from shardstream.io.cache import ShardCache\n"
              "with ShardCache(sys.argv[1]).open(sys.argv[2]) as f: print(hashlib.sha256(f.read()).hexdigest())")
    try:
        procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "c"), stub.url("d/s2.tar")],
                                  stdout=subprocess.PIPE) for _ in range(4)]
        outs = {p.communicate(timeout=60)[0].strip() for p in procs}
        assert all(p.returncode == 0 for p in procs)
        assert outs == {hashlib.sha256(blobs["d/s2.tar"]).hexdigest().encode()}
        assert stub.full_gets("d/s2.tar") == 1
    finally:
        stub.stop()


@pytest.mark.skipif(fcntl is None, reason="no fcntl: no cross-process lock")
def test_a_shard_is_fetched_only_under_its_lock(tmp_path, local_shards):
    """A reader process reads two shards through the cache while this process holds the second one's lock (as
    another process downloading it would), puts the shard in place and lets go. The shard reader opens the next
    shard ahead; through the cache that stream fetched it outside its lock (once in every process that read it),
    so the reader must not have asked the server for the second shard at all: one download, by the lock holder."""
    files = {}
    for i, path in enumerate(local_shards[:2]):
        with open(path, "rb") as f:
            files[f"l/shard-{i:03d}.tar"] = f.read()
    stub = StubHTTP(files)
    cache = ShardCache(str(tmp_path / "c"))
    first, second = (stub.url(name) for name in files)
    os.makedirs(os.path.join(cache.directory, ".locks"))
    lock = os.open(os.path.join(cache.directory, ".locks", cache.name_for(second) + ".lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    script = ("import sys; from shardstream.dataset import WebDataset\n"
              "for s in WebDataset(sys.argv[2:], shardshuffle=False, cache_dir=sys.argv[1]): print(s['__key__'], "
              "flush=True)")
    proc = subprocess.Popen([sys.executable, "-c", script, cache.directory, first, second], stdout=subprocess.PIPE,
                            text=True)
    try:
        keys = []
        for line in proc.stdout:  # the first shard's samples (the process ends the loop if it fails)
            keys.append(line.strip())
            if len(keys) == len(samples_of([local_shards[0]])):
                break
        with open(cache.path_for(second) + ".part", "wb") as f:  # "downloaded" by this process, under its lock
            f.write(files["l/shard-001.tar"])
        os.replace(cache.path_for(second) + ".part", cache.path_for(second))
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
        out = proc.communicate(timeout=120)[0]
        stub.stop()
    assert proc.returncode == 0
    assert keys + out.split() == [s["__key__"] for s in samples_of(local_shards[:2])]
    assert [stub.full_gets(name) for name in files] == [1, 0], stub.requests
    assert stub.sent == len(files["l/shard-000.tar"])


def test_lru_eviction_keeps_the_size_limit(tmp_path, stub, blobs):
    cache = ShardCache(str(tmp_path), max_bytes=250_000)  # room for two shards
    for i in (0, 1, 0, 2):  # s0 used again after s1: s1 is the least recently used when s2 arrives
        with cache(stub.url(f"d/s{i}.tar")):
            pass
        time.sleep(0.01)
    names = cached_files(tmp_path)
    assert names == sorted([cache.name_for(stub.url("d/s0.tar")), cache.name_for(stub.url("d/s2.tar"))])
    assert sum(os.path.getsize(tmp_path / n) for n in names) <= 250_000


def test_eviction_never_removes_a_shard_being_read(tmp_path, stub, blobs):
    cache = ShardCache(str(tmp_path), max_bytes=150_000)  # room for one shard
    reading = cache(stub.url("d/s0.tar"))
    first = reading.read(10)
    for i in (1, 2, 3):
        with cache(stub.url(f"d/s{i}.tar")) as f:
            assert f.read() == blobs[f"d/s{i}.tar"]
    assert cache.name_for(stub.url("d/s0.tar")) in cached_files(tmp_path)  # still there: it is being read
    assert first + reading.read() == blobs["d/s0.tar"]
    reading.close()
    removed = cache.evict()
    assert cache.name_for(stub.url("d/s0.tar")) in removed
    assert cached_files(tmp_path) == [cache.name_for(stub.url("d/s3.tar"))]


def test_size_is_verified_and_nothing_partial_is_left(tmp_path):
    class Lying(io.BytesIO):
        size = 1000  # announces more than it gives

    register_opener("lying", lambda url: Lying(b"x" * 10))
    try:
        with pytest.raises(OpenError, match="downloaded 10 bytes, the server announced 1000"):
            ShardCache(str(tmp_path)).open("lying://h/a.tar")
    finally:
        unregister_opener("lying")
    assert cached_files(tmp_path) == [] and not partial_files(tmp_path)


@pytest.mark.parametrize("md5, ok", [(True, True), ("wrong", False)])
def test_md5_from_the_server_is_verified(tmp_path, blobs, md5, ok):
    stub = StubHTTP(blobs, md5=md5)
    try:
        cache = ShardCache(str(tmp_path))
        if ok:
            with cache(stub.url("d/s3.tar")) as f:
                assert f.read() == blobs["d/s3.tar"]
        else:
            with pytest.raises(OpenError, match="MD5"):
                cache(stub.url("d/s3.tar"))
            assert cached_files(tmp_path) == []
            assert ShardCache(str(tmp_path), verify=False)(stub.url("d/s3.tar")).read() == blobs["d/s3.tar"]
    finally:
        stub.stop()


def test_local_shards_are_read_in_place(tmp_path):
    path = tmp_path / "local.tar"
    path.write_bytes(b"abc")
    cache = ShardCache(str(tmp_path / "c"))
    for url in (str(path), f"file://{path}"):
        with cache(url) as f:
            assert f.read() == b"abc"
    assert not (tmp_path / "c").exists()


def test_pipe_urls_are_cached_and_failed_commands_are_not(tmp_path, local_shards):
    src = local_shards[0]
    with open(src, "rb") as f:
        payload = f.read()
    cache = ShardCache(str(tmp_path / "c"))
    with cache(f"pipe:cat {src}") as f:
        assert f.read() == payload
    with pytest.raises(OpenError, match="status 3"):
        cache(f"pipe:cat {src}; exit 3")
    with pytest.raises(OpenError, match="not a complete tar archive"):  # no size: the tar must be whole
        cache(f"pipe:head -c 1536 {src}")
    assert len(cached_files(tmp_path / "c")) == 1


@pytest.mark.parametrize("cut", ["between members", "inside a member", "none"])
def test_a_download_without_length_is_cached_only_when_the_tar_is_whole(tmp_path, local_shards, cut):
    """No Content-Length, no Range: a body that ends early (even exactly between two members) is refused."""
    from shardstream.tar.index import scan_file

    with open(local_shards[1], "rb") as f:
        data = f.read()
    boundary = scan_file(local_shards[1])[3][1] - 512  # where the fourth member's header starts
    keep = {"between members": boundary, "inside a member": boundary + 700, "none": len(data)}[cut]
    stub = StubHTTP({"a.tar": data}, ranges=False, length=False, short=len(data) - keep)
    try:
        cache = ShardCache(str(tmp_path))
        if cut == "none":
            with cache(stub.url("a.tar")) as f:
                assert f.read() == data
            assert len(cached_files(tmp_path)) == 1
        else:
            with pytest.raises(OpenError, match=r"a\.tar.*not a complete tar archive") as info:
                cache(stub.url("a.tar"))
            assert info.value.url == stub.url("a.tar")
            assert cached_files(tmp_path) == [] and not partial_files(tmp_path)
    finally:
        stub.stop()


def test_stale_temporary_files_are_removed(tmp_path):
    stale, fresh = tmp_path / ".x.tar.0001.tmp", tmp_path / ".y.tar.0002.tmp"
    for p in (stale, fresh):
        p.write_bytes(b"partial")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    ShardCache(str(tmp_path), max_bytes=10).evict()
    assert not stale.exists() and fresh.exists()


def test_webdataset_cache_from_arguments_or_environment(tmp_path, stub, monkeypatch, local_shards, expected):
    from shardstream.dataset import WebDataset

    with open(local_shards[0], "rb") as f:
        stub.files["t/a.tar"] = f.read()
    want = [s for s in expected if s["__key__"].startswith("s00-")]
    ds = WebDataset(stub.url("t/a.tar"), shardshuffle=False, cache_dir=str(tmp_path / "arg"))
    got = list(ds)
    assert [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in got] == want
    assert len(cached_files(tmp_path / "arg")) == 1
    assert {s["__local_path__"] for s in got} == {str(tmp_path / "arg" / n) for n in cached_files(tmp_path / "arg")}
    monkeypatch.setenv("SHARDSTREAM_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("SHARDSTREAM_CACHE_SIZE", "10M")
    assert cache_opener(None).max_bytes == 10 << 20 and cache_opener("x", 5).max_bytes == 5
    assert len(list(WebDataset(stub.url("t/a.tar"), shardshuffle=False))) == len(want)
    assert len(cached_files(tmp_path / "env")) == 1 and stub.full_gets("t/a.tar") == 2
    assert samples_of([stub.url("t/a.tar")], opener=ShardCache(str(tmp_path / "env"))) == want


def test_dataloader_workers_share_the_cache(tmp_path, local_shards, expected):
    """The dataset (with its ShardCache) is pickled into the workers; every shard is downloaded once."""
    torch = pytest.importorskip("torch")
    from shardstream.dataset import WebDataset

    files = {}
    for i, path in enumerate(local_shards):
        with open(path, "rb") as f:
            files[f"w/{i}.tar"] = f.read()
    stub = StubHTTP(files)
    try:
        urls = [stub.url(f"w/{i}.tar") for i in range(4)]
        ds = WebDataset(urls, shardshuffle=False, cache_dir=str(tmp_path / "c"))
        for _ in range(2):  # two epochs: the second one reads only the cache
            got = sorted(s["__key__"] for s in torch.utils.data.DataLoader(ds, num_workers=2, batch_size=None))
            assert got == sorted(s["__key__"] for s in expected)
        assert [stub.full_gets(f"w/{i}.tar") for i in range(4)] == [1, 1, 1, 1]
    finally:
        stub.stop()


def test_a_dataset_spec_reads_through_the_cache_and_refuses_what_cannot_apply(tmp_path, stub, local_shards, expected):
    """WebDataset(spec, cache_dir=...) caches the spec's remote shards (the argument was ignored), and the options
    that cannot apply to an exact mix are refused, not ignored."""
    from shardstream.dataset import WebDataset
    from shardstream.errors import ConfigError

    with open(local_shards[0], "rb") as f:
        stub.files["t/a.tar"] = f.read()
    spec = {"sources": [{"name": "a", "shards": [stub.url("t/a.tar")], "samples": 4}]}
    ds = WebDataset(spec, shardshuffle=False, cache_dir=str(tmp_path / "c"))
    got = [s["__key__"] for s in ds]
    assert len(got) == 4 and set(got) <= {s["__key__"] for s in expected}
    assert len(cached_files(tmp_path / "c")) == 1
    for option in ("resampled", "repeat", "equalize"):
        with pytest.raises(ConfigError, match=f"{option}=True cannot apply to a dataset spec"):
            WebDataset(spec, **{option: True})
