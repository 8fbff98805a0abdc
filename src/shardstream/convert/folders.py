"""ImageFolder trees (``ROOT/<class>/<file>``, torchvision's layout) as samples, listed once and read in tasks.

Classes are the top-level folders, sorted and numbered from 0 as torchvision numbers them; each file becomes
a sample keyed by its path without extension (``cat/0001``) with the file's bytes under its own extension (as
it is, lower-cased) and ``cls``, the class number (``rename`` names these fields otherwise: ``{"cls":
"label.cls", "jpg": "image.jpg"}``). Hidden files and files outside class folders are reported as
skipped; so are files sharing a key with another file of a different extension (``a.jpg`` and ``a.png``).

>>> import os
>>> for name in ("cat/1.jpg", "cat/2.jpg", "dog/1.png"):
...     os.makedirs(os.path.join("pets", os.path.dirname(name)), exist_ok=True)
...     _ = open(os.path.join("pets", name), "wb").write(b"image bytes")
>>> listing = list_imagefolder("pets")
>>> listing.classes, len(listing.files)
(['cat', 'dog'], 3)
>>> [sorted(s) for s in ImageFolderSource("pets", listing.files[2:]).samples()]
[['__key__', 'cls', 'png']]
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ConfigError
from ..process import Skip

__all__ = ["ImageFolderListing", "ImageFolderSource", "list_class", "list_imagefolder"]


@dataclasses.dataclass(frozen=True)
class ImageFolderListing:
    """The classes, the files ``(relative path, class number)`` in sorted order, their sizes in bytes (as
    ``os.path.getsize`` gives them, links followed), and what was skipped."""

    classes: list[str]
    files: list[tuple[str, int]]
    skipped: list[Skip]
    sizes: list[int] = dataclasses.field(default_factory=list)


#: runs ``fn(*args)`` for each ``args`` (maybe on other processes) and gives the results in order
Mapper = Callable[[Callable[..., Any], list[tuple[Any, ...]]], list[Any]]


def _here(fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
    return [fn(*args) for args in calls]


def list_imagefolder(root: str, mapper: Mapper | None = None) -> ImageFolderListing:
    """List an ImageFolder tree (see the module docstring). ``mapper`` lists the class folders (one call of
    :func:`list_class` each), where the job's engine runs them: on its workers, beside each other."""
    if not os.path.isdir(root):
        raise ConfigError(f"{root!r} is not a directory")
    classes = sorted(d for d in os.listdir(root) if not d.startswith(".") and os.path.isdir(os.path.join(root, d)))
    if not classes:
        raise ConfigError(f"{root!r} has no class folders; an ImageFolder is ROOT/<class name>/<file>")
    skipped = [Skip(name, "a file outside the class folders") for name in sorted(os.listdir(root))
               if os.path.isfile(os.path.join(root, name))]  # fmt: skip
    files: list[tuple[str, int]] = []
    sizes: list[int] = []
    for got_files, got_sizes, got_skipped in (mapper or _here)(list_class, [(root, cls, number) for number, cls
                                                                           in enumerate(classes)]):  # fmt: skip
        files += got_files
        sizes += got_sizes
        skipped += got_skipped
    return ImageFolderListing(classes, files, skipped, sizes)


def list_class(root: str, cls: str, number: int) -> tuple[list[tuple[str, int]], list[int], list[Skip]]:
    """The files ``(relative path, number)`` of the class folder ``root/cls``, their sizes, and what is skipped
    there (a key is the file's folder and stem, so only files of one folder can share one)."""
    files: list[tuple[str, int]] = []
    sizes: list[int] = []
    skipped: list[Skip] = []
    seen: dict[str, str] = {}
    for rel_dir, entry in _walk(os.path.join(root, cls), cls):
        name = entry.name
        dot = name.rfind(".")
        if dot <= 0 or name[0] == ".":  # os.path.splitext's rule, for a name that does not start with a dot
            skipped.append(Skip(f"{rel_dir}/{name}", "a hidden file or a file without extension"))
            continue
        rel = f"{rel_dir}/{name}"
        key = f"{rel_dir}/{name[:dot].replace('.', '_')}"
        if key in seen:
            skipped.append(Skip(rel, f"same key as {seen[key]!r}"))
            continue
        seen[key] = rel
        files.append((rel, number))
        sizes.append(entry.stat().st_size)
    return files, sizes, skipped


def _walk(top: str, rel_dir: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """The files under ``top`` as ``os.walk`` visits them (top-down, names sorted, hidden folders and links to
    folders not entered, unreadable folders passed over), each with its folder relative to the root: one
    ``scandir`` per folder and one ``stat`` per file, where ``os.walk`` and ``getsize`` took more Python."""
    try:
        with os.scandir(top) as it:
            entries = list(it)
    except OSError:
        return
    folders: list[os.DirEntry[str]] = []
    files: list[os.DirEntry[str]] = []
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        (folders if is_dir else files).append(entry)
    for entry in sorted(files, key=_name):
        yield rel_dir, entry
    for entry in sorted(folders, key=_name):
        if not entry.name.startswith(".") and not entry.is_symlink():
            yield from _walk(entry.path, f"{rel_dir}/{entry.name}")


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


@dataclasses.dataclass(frozen=True)
class ImageFolderSource:
    """Some files of an ImageFolder, ``(relative path, class number)`` each, read as they are; ``rename`` maps
    ``cls`` and file extensions to other field names."""

    root: str
    files: tuple[tuple[str, int], ...] | list[tuple[str, int]]
    rename: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(tuple(f) for f in self.files))

    @property
    def url(self) -> str:
        return f"{self.root}/{self.files[0][0]}" if self.files else self.root

    def describe(self) -> str:
        return f"imagefolder {os.path.abspath(self.root)} {self.files[0][0] if self.files else ''} n={len(self.files)}"

    def samples(self) -> Iterator[dict[str, Any] | Skip]:
        names = dict(self.rename)
        label = names.get("cls", "cls")
        for rel, number in self.files:
            stem, ext = os.path.splitext(rel)
            key = f"{os.path.dirname(stem)}/{os.path.basename(stem).replace('.', '_')}"
            try:
                with open(os.path.join(self.root, rel), "rb") as f:
                    data = f.read()
            except OSError as e:
                yield Skip(key, f"cannot read {rel!r}: {e.strerror or e}")
                continue
            ext = ext[1:].lower()
            yield {"__key__": key, names.get(ext, ext): data, label: str(number).encode("ascii")}
