"""The shard cache's index: the size and last use of every cached shard, so that making room costs a few row
look-ups per download instead of a listing of the whole cache folder.

The index is a small sqlite3 database in the cache folder (``.index.sqlite3``), shared by every process that
uses the folder. The cache (:mod:`shardstream.io.cache`) opens it only while it holds the folder's eviction lock,
so one process at a time reads or changes it. It is a hint, checked before it is acted on:

- a record is used only when it names a plain file of the folder (no ``/``, no leading dot, not a link) whose
  size is the recorded one; a shard read since it was recorded (a newer modification time: readers touch the
  file) is moved to its new place in the order instead of being removed;
- it keeps the folder's modification time as of its last change: the cache changes the folder's entries only
  under the lock (downloads are written in the ``.partial`` subfolder, lock files live in ``.locks``, and the
  database keeps its journal file), so a different time means that someone else added, removed or renamed a file
  (a user, a process killed between renaming a shard into place and recording it), and the index is rebuilt;
- it is rebuilt from a scan of the folder when it is missing, unreadable, of another version or schema (a
  trigger or a view added to it would run on the next write), or found wrong (a
  record whose file is gone or differs: an edit, or a change the folder's time did not show, as within one tick
  of its clock), and at least once every ``max(RESCAN_EVERY, entries)`` downloads whatever happens. A scan also
  removes the temporary files of downloads dead for more than ``STALE_TMP`` seconds.

Its worst failure is therefore a shard of the folder removed early (read again from its source later, as when
the recorded total is edited to a plausible wrong number), never a file outside the folder, an error for a
reader, or a loop.

>>> import os
>>> os.makedirs("shards", exist_ok=True)
>>> for name in ("a.tar", "b.tar", "c.tar"):
...     with open(os.path.join("shards", name), "wb") as f: _ = f.write(b"x" * 100)
>>> index = CacheIndex("shards")
>>> with index:
...     index.total, index.count  # built from a scan of the folder: it did not exist
(300, 3)
>>> def remove(path):  # the cache's own removal skips shards being read; this one removes everything
...     os.unlink(path)
...     return True
>>> with index:
...     len(index.evict(needed=0, max_bytes=150, remove=remove)), index.total
(2, 100)
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from typing import Any

from ..redact import redacting_logger

__all__ = ["INDEX_NAME", "PARTIAL", "RESCAN_EVERY", "STALE_TMP", "CacheIndex", "plain_name"]

logger = redacting_logger(__name__)

INDEX_NAME = ".index.sqlite3"
PARTIAL = ".partial"  # the subfolder of downloads in progress
RESCAN_EVERY = 256  # downloads between two scans at least (more when the cache holds more entries)
STALE_TMP = 600.0  # seconds: an unlocked temporary file this old belongs to a dead download
_VERSION = 1
_PAGE = 64  # records read at a time while making room


_SCHEMA = ("CREATE TABLE entries (name TEXT PRIMARY KEY, size INTEGER, mtime INTEGER);"
           "CREATE INDEX by_use ON entries (mtime, name);"
           "CREATE TABLE meta (key TEXT PRIMARY KEY, value);")
_expected: list[tuple[Any, ...]] = []


def _schema_of(con: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def _expected_schema() -> list[tuple[Any, ...]]:
    if not _expected:
        with contextlib.closing(sqlite3.connect(":memory:")) as con:
            con.executescript(_SCHEMA)
            _expected.extend(_schema_of(con))
    return _expected


class _Disagrees(Exception):
    """A record the folder contradicts: the index is rebuilt."""


def plain_name(name: object) -> bool:
    """Whether ``name`` may name a cached shard: a file name of the folder itself, not hidden, no path.

    >>> [plain_name(n) for n in ("a.tar", "../a.tar", "/etc/passwd", ".index.sqlite3", "a/b", "", 7)]
    [True, False, False, False, False, False, False]
    """
    return (isinstance(name, str) and bool(name) and not name.startswith(".") and "/" not in name
            and "\x00" not in name and (os.altsep is None or os.altsep not in name) and os.sep not in name)


def _remove_if_stale(entry: os.DirEntry[str]) -> None:
    """Remove a download's temporary file unchanged for ``STALE_TMP`` seconds: its process died."""
    with contextlib.suppress(FileNotFoundError):
        if entry.name.endswith(".tmp") and time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_TMP:
            os.unlink(entry.path)


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


class CacheIndex:
    """The index of the cache folder ``directory``; use it as a context manager, under the folder's eviction lock.

    Entering opens the database (rebuilding it when missing, unreadable or due a scan); :meth:`add` records a
    shard just renamed into place; :meth:`evict` removes least recently used shards until the cache fits.
    ``scanned`` tells whether this session scanned the folder (the cache then tidies its lock files too).
    """

    def __init__(self, directory: str):
        self.directory = directory
        self.path = os.path.join(directory, INDEX_NAME)
        self.total = self.count = self.since_scan = 0
        self.scanned = False
        self._con: sqlite3.Connection | None = None

    # -- the database ------------------------------------------------------------------------------------------

    def __enter__(self) -> CacheIndex:
        self.scanned = False
        try:
            self._open()
        except sqlite3.DatabaseError as e:  # garbage, a foreign schema, a lock held by someone else
            logger.warning("shard cache index %s unreadable (%s): rebuilt from the folder", self.path, e)
            self._close()
            self._discard()
            self._open()
        if self.since_scan >= max(RESCAN_EVERY, self.count):
            self.rebuild()
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        self._close()

    def _open(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(self.path).st_mode):  # a link or anything else: not ours to write through
                self._discard()
        fresh = not os.path.exists(self.path)
        con = self._con = sqlite3.connect(self.path, timeout=2.0, isolation_level=None)
        con.execute("PRAGMA synchronous=OFF")  # a hint: a machine crash at worst leaves it to be rebuilt
        con.execute("PRAGMA journal_mode=PERSIST")  # a journal file created once: the folder's time stays
        if fresh:
            con.executescript(f"BEGIN; {_SCHEMA} COMMIT;")
            self.rebuild()
            return
        if _schema_of(con) != _expected_schema():  # a trigger or a view could run anything on our next write
            raise sqlite3.DatabaseError("not the schema the cache writes")
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        values = [meta.get(k) for k in ("version", "total", "count", "since_scan")]
        if values[0] != _VERSION or not all(_count(v) for v in values[1:]):
            logger.info("shard cache index %s: version or totals not as written: rebuilt", self.path)
            self.rebuild()
        elif meta.get("folder") != self._folder_time():
            logger.debug("shard cache index %s: the folder changed behind its back: rebuilt", self.path)
            self.rebuild()
        else:
            self.total, self.count, self.since_scan = (int(v) for v in values[1:])  # type: ignore[arg-type]

    def _close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                if self._con.in_transaction:
                    self._con.rollback()
                self._con.close()
            self._con = None

    def _discard(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path + suffix)

    @property
    def con(self) -> sqlite3.Connection:
        assert self._con is not None, "use CacheIndex as a context manager"
        return self._con

    def _folder_time(self) -> int:
        return os.stat(self.directory).st_mtime_ns

    def _save_meta(self) -> None:
        """Write the totals, and the folder's time now that this process has made its changes to it."""
        self.con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             [("version", _VERSION), ("total", self.total), ("count", self.count),
                              ("since_scan", self.since_scan), ("folder", self._folder_time())])

    # -- changes ----------------------------------------------------------------------------------------------

    def rebuild(self) -> None:
        """Replace every record by a scan of the folder (and remove the temporaries of dead downloads)."""
        rows = []
        for entry in os.scandir(self.directory):
            with contextlib.suppress(FileNotFoundError):
                if entry.name.startswith("."):
                    _remove_if_stale(entry)  # a temporary file where earlier versions wrote them
                elif plain_name(entry.name) and entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    rows.append((entry.name, st.st_size, st.st_mtime_ns))
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(os.path.join(self.directory, PARTIAL)):
                _remove_if_stale(entry)
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        con.execute("DELETE FROM entries")
        con.executemany("INSERT INTO entries VALUES (?, ?, ?)", rows)
        self.total, self.count, self.since_scan = sum(r[1] for r in rows), len(rows), 0
        self._save_meta()
        con.execute("COMMIT")
        self.scanned = True
        logger.debug("shard cache index %s rebuilt: %d shards, %d bytes", self.path, self.count, self.total)

    def add(self, name: str, size: int, mtime_ns: int) -> None:
        """Record the shard ``name`` (just renamed into place): its size and modification time."""
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        old = con.execute("SELECT size FROM entries WHERE name = ?", (name,)).fetchone()
        if old is not None:
            if not _count(old[0]):
                con.execute("ROLLBACK")
                return self.rebuild()  # the scan records the new file too
            self.total -= old[0]
            self.count -= 1
        con.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", (name, size, mtime_ns))
        self.total += size
        self.count += 1
        self.since_scan += 1
        self._save_meta()
        con.execute("COMMIT")
        return None

    def evict(self, needed: int, max_bytes: int, remove: Callable[[str], bool]) -> list[tuple[str, int]]:
        """Remove least recently used shards (``remove(path)``: False when it may not, as for a shard being read)
        until the recorded total plus ``needed`` fits in ``max_bytes``. Returns the (name, size) removed."""
        removed: list[tuple[str, int]] = []
        retried = self.scanned
        while True:
            try:
                self._evict(needed, max_bytes, remove, removed)
                return removed
            except _Disagrees as e:
                if self.con.in_transaction:
                    self.con.execute("COMMIT")  # what was removed stays removed
                if retried:  # the folder changed under a fresh scan: leave the rest to the next download
                    logger.info("shard cache index %s: %s, again after a scan: retried later", self.path, e)
                    self.since_scan = max(RESCAN_EVERY, self.count)
                    self.con.execute("BEGIN IMMEDIATE")
                    self._save_meta()
                    self.con.execute("COMMIT")
                    return removed
                logger.info("shard cache index %s: %s: rebuilt from the folder", self.path, e)
                self.rebuild()
                retried = True

    def _evict(self, needed: int, max_bytes: int, remove: Callable[[str], bool],
               removed: list[tuple[str, int]]) -> None:
        if self.total + needed <= max_bytes:
            return  # nothing to write
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        after: tuple[Any, Any] = (-1, "")
        while self.total + needed > max_bytes:
            rows = con.execute("SELECT name, size, mtime FROM entries WHERE (mtime, name) > (?, ?) "
                               "ORDER BY mtime, name LIMIT ?", (*after, _PAGE)).fetchall()
            if not rows:
                self._check_totals()  # every remaining shard is being read, or the totals drifted
                break
            for name, size, mtime in rows:
                st = self._check(name, size, mtime)
                if st.st_mtime_ns > mtime:  # read since it was recorded: it goes to its new place in the order,
                    con.execute("UPDATE entries SET mtime = ? WHERE name = ?", (st.st_mtime_ns, name))
                    break  # maybe before the rest of this page: read again from the same place
                after = (mtime, name)  # removed, or being read: passed
                if self.total + needed <= max_bytes:
                    break
                if remove(os.path.join(self.directory, name)):
                    con.execute("DELETE FROM entries WHERE name = ?", (name,))
                    self.total -= size
                    self.count -= 1
                    removed.append((name, size))
        self._save_meta()
        con.execute("COMMIT")

    def _check(self, name: object, size: object, mtime: object) -> os.stat_result:
        if not (plain_name(name) and _count(size) and type(mtime) is int):
            raise _Disagrees(f"a record is not a shard of the folder ({str(name)[:80]!r}, size {str(size)[:20]})")
        assert isinstance(name, str)
        try:
            st = os.lstat(os.path.join(self.directory, name))
        except FileNotFoundError:
            raise _Disagrees(f"{name} is recorded but gone") from None
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            raise _Disagrees(f"{name} is recorded with {size} bytes, the file has {st.st_size}")
        return st

    def _check_totals(self) -> None:
        count, total = self.con.execute("SELECT COUNT(*), TOTAL(size) FROM entries").fetchone()
        if (count, total) != (self.count, self.total):
            raise _Disagrees(f"the totals ({self.count} shards, {self.total} bytes) differ from the records "
                             f"({count}, {int(total)})")
