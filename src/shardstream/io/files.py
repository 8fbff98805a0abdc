"""Small files written beside shards or outputs (a class list, a report, an index, a manifest, a Parquet part):
written all or nothing, never through a link.

:func:`write_file` creates a new temporary file beside the target (``O_CREAT | O_EXCL | O_NOFOLLOW``: it cannot
open an existing file or follow a link planted under its name) and renames it over the target: a symbolic link
there is replaced, its target never written. A temporary name is ``.NAME.XXXXXXXX.tmp`` (random: another process, or another user
who can write to the folder, cannot plant a link under it in advance).

>>> import os
>>> os.symlink("elsewhere.txt", "classes.txt")
>>> write_file("classes.txt", b"cat\\n", "the class list")
>>> os.path.islink("classes.txt"), open("classes.txt").read(), os.path.exists("elsewhere.txt")
(False, 'cat\\n', False)
"""

from __future__ import annotations

import contextlib
import os
import secrets

from ..errors import WriteError

__all__ = ["write_file"]


def write_file(path: str | os.PathLike[str], data: bytes, what: str) -> None:
    """Write ``data`` to ``path`` (see the module docstring); a failure is a WriteError naming ``what`` and the
    path, and leaves no temporary file."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, flags, 0o666)  # 0o666 less the umask, as open(path, "w") creates files
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise WriteError(f"could not write {what} {path!r}: {e.strerror or e}", url=path) from e
