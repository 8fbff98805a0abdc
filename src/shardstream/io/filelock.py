"""File locks between processes (``fcntl.flock``), as the shard cache uses them.

- :func:`locked`: hold a lock file that stays in place (the cache folder's eviction lock);
- :func:`removable_lock`: hold a lock file that is removed when let go, so that locks per name (one per shard)
  do not pile up; a process that waited on a file removed meanwhile sees that the path no longer names the file
  it locked, and locks the file now there;
- :func:`remove_unless_locked`: remove a file unless someone holds a lock on it (a shard being read holds a
  shared one; a download holds its lock file).

Without ``fcntl`` (not POSIX) locking does nothing: one process alone is still correct.

>>> with removable_lock("shard.lock"):
...     import os; os.path.exists("shard.lock")
True
>>> os.path.exists("shard.lock")
False
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["locked", "names", "remove_unless_locked", "removable_lock", "try_lock"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def try_lock(fd: int, shared: bool = False, wait: bool = True) -> bool:
    """Lock the open file ``fd`` (shared or exclusive); without ``wait``, False when someone else holds it."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold the lock file ``path`` (created if needed) exclusively, waiting for it; the file stays."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | _CLOEXEC, 0o666)
    try:
        try_lock(fd)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def removable_lock(path: str) -> Iterator[None]:
    """Hold the lock file ``path`` (created if needed) exclusively, waiting for it, and remove it before letting go."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _CLOEXEC, 0o666)
        try:
            try_lock(fd)
            if fcntl is None or names(path, fd):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # removed (or replaced) while this process waited: lock the file there now
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still held: whoever waits on this file finds it gone, and tries again
        os.close(fd)


def names(path: str, fd: int) -> bool:
    """Whether ``path`` names the file open as ``fd`` (not removed, nor replaced by another)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (mine.st_ino, mine.st_dev)


def remove_unless_locked(path: str) -> bool:
    """Remove the file ``path`` (not a link) unless someone holds a lock on it; whether it was removed."""
    try:
        fd = os.open(path, os.O_RDONLY | _CLOEXEC | _NOFOLLOW)
    except OSError:  # gone, a link, a folder
        return False
    try:
        if not try_lock(fd, wait=False) or not names(path, fd):
            return False  # being read (or downloaded), or replaced meanwhile
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(fd)
