"""The shard cache at scale: eviction from the index (no listing of the folder per download), the index checked and
rebuilt when damaged, lock files removed, and several processes sharing one folder within its bound."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sqlite3
import subprocess
import sys

import pytest
from fault_servers import StubHTTP

from shardstream.io import register_opener, unregister_opener
from shardstream.io.cache import ShardCache
from shardstream.io.cache_index import INDEX_NAME, PARTIAL
from shardstream.io.filelock import removable_lock

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

SIZE = 1000  # bytes per shard


class Sized(io.BytesIO):
    size: int | None = None


@pytest.fixture
def mem():
    """A ``mem://NAME`` opener: SIZE bytes derived from NAME, with their size stated; counts what it serves."""
    served: list[str] = []

    def opener(url: str) -> io.BytesIO:
        served.append(url)
        stream = Sized(payload(url))
        stream.size = SIZE
        return stream

    register_opener("mem", opener)
    yield served
    unregister_opener("mem")


def payload(url: str) -> bytes:
    return hashlib.sha256(url.encode()).digest() * (SIZE // 32) + bytes(SIZE % 32)


def shards_in(directory) -> dict[str, int]:
    return {e.name: e.stat().st_size for e in os.scandir(directory) if not e.name.startswith(".") and e.is_file()}


def recorded(directory) -> dict[str, int]:
    con = sqlite3.connect(os.path.join(directory, INDEX_NAME))
    try:
        return dict(con.execute("SELECT name, size FROM entries").fetchall())
    finally:
        con.close()


def fill(directory, count: int) -> list[str]:
    """``count`` old shards written straight into the folder, oldest first."""
    os.makedirs(directory, exist_ok=True)
    names = [f"old-{i:05d}.tar" for i in range(count)]
    for i, name in enumerate(names):
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(bytes(SIZE))
        os.utime(path, ns=(10**18 + i * 10**9,) * 2)  # one second apart, long ago... in 2001
    return names


def read(cache: ShardCache, url: str) -> bytes:
    with cache(url) as f:
        return f.read()


def test_a_download_makes_room_without_listing_the_folder(tmp_path, mem, monkeypatch):
    """300 shards cached: each new download removes the least recently used one, looking at a few files only."""
    old = fill(tmp_path, 300)
    cache = ShardCache(str(tmp_path), max_bytes=300 * SIZE)
    urls = [f"mem://h/new-{i}.tar" for i in range(31)]
    read(cache, urls[0])  # the first download makes the index (a scan: its subfolders are new)
    calls = dict.fromkeys(("scandir", "listdir", "lstat", "stat"), 0)

    def counting(name, real):
        def call(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return call

    for name in calls:
        monkeypatch.setattr(os, name, counting(name, getattr(os, name)))
    for url in urls[1:]:
        assert read(cache, url) == payload(url)
    monkeypatch.undo()
    assert calls["scandir"] == calls["listdir"] == 0, calls
    assert calls["lstat"] + calls["stat"] <= 30 * 30, calls  # a few per download, not one per shard cached
    left = shards_in(tmp_path)
    assert sorted(left) == sorted(old[31:] + [cache.name_for(url) for url in urls])
    assert recorded(tmp_path) == left


def test_a_shard_read_since_it_was_recorded_keeps_its_place_in_the_order(tmp_path, mem):
    old = fill(tmp_path, 5)
    cache = ShardCache(str(tmp_path), max_bytes=5 * SIZE)
    cache.evict()
    with open(os.path.join(tmp_path, old[0]), "rb"):
        os.utime(os.path.join(tmp_path, old[0]))  # what a reader does: old-00000 is now the most recently used
    read(cache, "mem://h/a.tar")
    read(cache, "mem://h/b.tar")
    assert sorted(shards_in(tmp_path)) == sorted([old[0], *old[3:], cache.name_for("mem://h/a.tar"),
                                                 cache.name_for("mem://h/b.tar")])


def later(directory) -> None:
    """The folder's time a second later, as the clock shows a change after the cache's last one (changes within one
    tick of the clock keep the same time: the record checks and the periodic scan find those)."""
    st = os.stat(directory)
    os.utime(directory, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def edit_index(directory, sql: str, *rows) -> None:
    """An edit that leaves the folder's time as it was (the journal file stays): only the records can tell."""
    con = sqlite3.connect(os.path.join(directory, INDEX_NAME), isolation_level=None)
    con.execute("PRAGMA journal_mode=PERSIST")
    con.executemany(sql, rows) if rows else con.execute(sql)
    con.close()


def test_shards_read_since_they_were_recorded_are_evicted_in_the_order_of_their_reads(tmp_path, mem):
    """The records say old-00000 was used at 0 s, old-00001 at 1 s; the files say old-00000 was read again at 0.5 s:
    old-00000 is still the least recently used, then old-00001."""
    old = fill(tmp_path, 3)
    cache = ShardCache(str(tmp_path), max_bytes=4 * SIZE)
    read(cache, "mem://h/w.tar")  # the index is made, and the folder's subfolders: nothing more to scan
    os.utime(os.path.join(tmp_path, old[0]), ns=(10**18 + 5 * 10**8,) * 2)  # read at 0.5 s
    read(cache, "mem://h/a.tar")
    assert old[0] not in shards_in(tmp_path) and old[1] in shards_in(tmp_path)
    read(cache, "mem://h/b.tar")
    assert sorted(shards_in(tmp_path)) == sorted([old[2], *(cache.name_for(f"mem://h/{n}.tar") for n in "wab")])


def damage_rows(directory, *rows) -> None:
    edit_index(directory, "INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", *rows)


DAMAGES = {
    "deleted": lambda d: os.unlink(os.path.join(d, INDEX_NAME)),
    "garbage bytes": lambda d: open(os.path.join(d, INDEX_NAME), "wb").write(os.urandom(3000)),
    "empty file": lambda d: open(os.path.join(d, INDEX_NAME), "wb").close(),
    "a record naming a file outside": lambda d: damage_rows(d, ("../outside.tar", SIZE, 0)),
    "an absolute path": lambda d: damage_rows(d, (os.path.join(os.path.dirname(d), "outside.tar"), SIZE, 0)),
    "a negative size": lambda d: damage_rows(d, ("old-00002.tar", -5, 0)),
    "a huge size": lambda d: damage_rows(d, ("old-00002.tar", 10**18, 0)),
    "a size as text": lambda d: damage_rows(d, ("old-00002.tar", "x", 0)),
    "a file deleted by hand": lambda d: os.unlink(os.path.join(d, "old-00001.tar")),
    "a file added by hand": lambda d: (fill(d, 6), later(d)),  # old-00005.tar, unknown to the index
    "a negative total": lambda d: edit_index(d, "UPDATE meta SET value = -1 WHERE key = 'total'"),
    "a record of a file that is not there": lambda d: damage_rows(d, ("gone.tar", SIZE, 0)),
    "a trigger": lambda d: edit_index(d, "CREATE TRIGGER t AFTER INSERT ON entries BEGIN "
                                         "DELETE FROM entries WHERE name = NEW.name; END"),  # records nothing
    "a link": lambda d: (os.unlink(os.path.join(d, INDEX_NAME)),
                         os.symlink(os.path.join(os.path.dirname(d), "outside.tar"), os.path.join(d, INDEX_NAME))),
}


SEEN_IN_RECORDS = {"garbage bytes", "a record naming a file outside", "an absolute path", "a negative size",
                   "a huge size", "a size as text", "a negative total", "a record of a file that is not there",
                   "a trigger"}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_index_is_rebuilt_and_nothing_outside_the_folder_is_touched(tmp_path, mem, damage):
    outside = tmp_path / "outside.tar"
    outside.write_bytes(b"o" * SIZE)  # the size a record names: only its name can tell it is not a shard
    folder = str(tmp_path / "c")
    fill(folder, 5)
    cache = ShardCache(folder, max_bytes=5 * SIZE)
    read(cache, "mem://h/w.tar")  # the index is made (and the subfolders the cache keeps)
    folder_time = os.stat(folder).st_mtime_ns
    DAMAGES[damage](folder)
    if damage in SEEN_IN_RECORDS:  # the folder looks unchanged: the records themselves must tell
        assert os.stat(folder).st_mtime_ns == folder_time
    for i in range(3):  # each download removes the oldest shard: the damaged record comes first
        assert read(cache, f"mem://h/{i}.tar") == payload(f"mem://h/{i}.tar")
    assert outside.read_bytes() == b"o" * SIZE
    left = shards_in(folder)
    assert recorded(folder) == left
    assert sum(left.values()) <= 5 * SIZE
    with contextlib.closing(sqlite3.connect(os.path.join(folder, INDEX_NAME))) as con:
        assert con.execute("SELECT type FROM sqlite_master WHERE type NOT IN ('table', 'index')").fetchall() == []
    assert {cache.name_for(f"mem://h/{i}.tar") for i in range(3)} <= set(left)


def test_lock_files_do_not_pile_up(tmp_path, mem):
    """An epoch over 100 shards with room for 10 leaves no lock file; one left by a dead download goes at a scan."""
    cache = ShardCache(str(tmp_path), max_bytes=10 * SIZE)
    for i in range(100):
        read(cache, f"mem://h/{i}.tar")
    assert os.listdir(tmp_path / ".locks") == [] and os.listdir(tmp_path / PARTIAL) == []
    assert len(shards_in(tmp_path)) == 10
    (tmp_path / ".locks" / "dead.tar.lock").write_bytes(b"")
    os.unlink(tmp_path / INDEX_NAME)  # the next eviction scans the folder
    cache.evict()
    assert os.listdir(tmp_path / ".locks") == []


LOCKER = """
import os, sys
from shardstream.io.filelock import removable_lock
path, marker, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
overlaps = 0
for _ in range(rounds):
    with removable_lock(path):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            overlaps += 1  # another process holds the lock too
            continue
        os.sched_yield()
        os.unlink(marker)
print(overlaps)
"""


@pytest.mark.skipif(fcntl is None, reason="no fcntl: no cross-process lock")
def test_a_removed_lock_file_never_lets_two_processes_in(tmp_path):
    """Processes take and remove the same lock file in a loop: one waits on a file the holder removes while a third
    creates a new one; the waiter notices and locks the new one, so at no time are two inside."""
    args = [str(tmp_path / "x.lock"), str(tmp_path / "inside"), "300"]
    procs = [subprocess.Popen([sys.executable, "-c", LOCKER, *args], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0] * 4
    assert outs == ["0"] * 4
    assert not os.path.exists(args[0])
    with removable_lock(args[0]):
        assert os.path.exists(args[0])


READER = """
import hashlib, sys
from shardstream.io.cache import ShardCache
cache = ShardCache(sys.argv[1], max_bytes=int(sys.argv[2]), verbose=True)  # "cached URL", "evicted NAME" on stderr
urls = sys.argv[4:]
rank = int(sys.argv[3])
for epoch in range(2):
    for url in urls[rank:] + urls[:rank]:
        with cache(url) as f:
            print(url.rsplit("/", 1)[1], hashlib.sha256(f.read()).hexdigest())
"""


@pytest.mark.skipif(fcntl is None, reason="no fcntl: no cross-process lock")
def test_four_processes_share_a_small_cache(tmp_path):
    """Four processes read the same shards twice through one folder: every read is right, a shard is downloaded
    once while it is cached (all fit: once in all), and the cache ends within its bound, its index true."""
    blobs = {f"p/s{i}.tar": bytes([i]) * (20_000 + i) for i in range(8)}
    want = {name.rsplit("/", 1)[1]: hashlib.sha256(data).hexdigest() for name, data in blobs.items()}
    stub = StubHTTP(blobs, delay=0.02)  # the processes overlap
    try:
        urls = [stub.url(name) for name in blobs]
        names = {ShardCache("x").name_for(url): url for url in urls}
        gets, logs = {}, []
        for folder, limit in (("small", 3 * 20_010), ("all", 8 * 20_010)):
            procs = []
            for rank in range(4):
                logs.append(tmp_path / f"{folder}-{rank}.log")
                with open(logs[-1], "w") as err:
                    procs.append(subprocess.Popen([sys.executable, "-c", READER, str(tmp_path / folder), str(limit),
                                                   str(rank), *urls], stdout=subprocess.PIPE, stderr=err, text=True))
            for p in procs:
                lines = [line.split() for line in p.communicate(timeout=120)[0].splitlines()]
                assert p.returncode == 0 and len(lines) == 16
                assert all(want[name] == digest for name, digest in lines)
            if folder == "small":  # every download was put in the cache, and a shard came again only once evicted
                said = [line.split()[2:4] for log in logs for line in log.read_text().splitlines()]
                cached = [sum(1 for w, what in said if w == "cached" and what == url) for url in urls]
                evicted = [sum(1 for w, what in said if w == "evicted" and names.get(what) == url) for url in urls]
                assert cached == [stub.full_gets(name) for name in blobs]
                assert all(c <= e + 1 for c, e in zip(cached, evicted, strict=True)), (cached, evicted)
            left = shards_in(tmp_path / folder)
            assert recorded(tmp_path / folder) == left  # the four kept one index between them
            assert os.listdir(tmp_path / folder / ".locks") == []
            ShardCache(str(tmp_path / folder), max_bytes=limit).evict()
            assert sum(shards_in(tmp_path / folder).values()) <= limit
            gets[folder] = [stub.full_gets(name) for name in blobs]
        assert [b - a for a, b in zip(gets["small"], gets["all"], strict=True)] == [1] * 8  # room for all: one each
    finally:
        stub.stop()
