"""The ImageFolder listing (one scandir per folder) gives what the os.walk rule gives: the same files in the
same order, the same sizes (links followed), the same skipped files; hidden folders and links to folders are
not entered."""

from __future__ import annotations

import os

import shardstream.convert as convert_module
from shardstream.convert import convert
from shardstream.convert.folders import list_imagefolder
from shardstream.process.job import EngineSession

TREE = ["cat/b.jpg", "cat/a.jpg", "cat/sub/z.jpg", "cat/sub/a.png", "cat/.hid/x.jpg", "cat/.hidden.jpg", "cat/noext",
        "cat/a.png", "dog/1.jpg", "dog/zz/yy/1.jpg", "dog/a.b.c.jpg", "dog/B.JPG", "stray.txt"]  # fmt: skip


def walk_rule(root: str) -> tuple[list, list, list]:
    files, sizes, skipped, seen = [], [], [], {}
    classes = sorted(d for d in os.listdir(root) if not d.startswith(".") and os.path.isdir(os.path.join(root, d)))
    skipped += [name for name in sorted(os.listdir(root)) if os.path.isfile(os.path.join(root, name))]
    for number, cls in enumerate(classes):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, cls)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            rel_dir = os.path.relpath(dirpath, root)
            for name in sorted(filenames):
                rel, (stem, ext) = f"{rel_dir}/{name}", os.path.splitext(name)
                key = f"{rel_dir}/{stem.replace('.', '_')}"
                if name.startswith(".") or not ext or not stem or key in seen:
                    skipped.append(rel)
                    continue
                seen[key] = rel
                files.append((rel, number))
                sizes.append(os.path.getsize(os.path.join(root, rel)))
    return files, sizes, skipped


def test_the_listing_follows_the_walk_rule(tmp_path):
    for n, rel in enumerate(TREE):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (n + 1))
    os.symlink(tmp_path / "dog", tmp_path / "cat" / "linked")  # a link to a folder: not entered
    os.symlink(tmp_path / "dog" / "1.jpg", tmp_path / "cat" / "link.jpg")  # a link to a file: its target's size
    listing = list_imagefolder(str(tmp_path))
    files, sizes, skipped = walk_rule(str(tmp_path))
    assert listing.classes == ["cat", "dog"]
    assert listing.files == files and listing.sizes == sizes
    assert [s.key for s in listing.skipped] == skipped
    assert ("cat/link.jpg", 0) in files and not any(".hid/" in rel or "linked/" in rel for rel, _ in files)


def tree_bytes(root: str) -> dict[str, bytes]:
    """Every file under ``root`` but the task manifests (they hold timings): relative path -> bytes."""
    return {os.path.relpath(os.path.join(d, n), root): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(root) for n in names if "_tasks" not in d}  # fmt: skip


def test_classes_listed_on_the_workers_give_the_same_plan_and_shards(tmp_path):
    """convert() lists the class folders on the pool's workers: the plan, the shards (bytes) and the skipped files
    are those of a listing here; the listing's CPU is counted on the workers that did it."""
    for n in range(60):
        path = tmp_path / "pets" / f"c{n % 5}" / (f"{n:03d}.jpg" if n % 13 else f"{n:03d}")  # some without extension
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([n]) * (100 + n))
    root = str(tmp_path / "pets")
    session = EngineSession("local", workers=2)
    try:
        listed = list_imagefolder(root, session.map)
        workers = set(session.cpu)
    finally:
        session.close()
    assert listed == list_imagefolder(root) and len(listed.skipped) == 5
    assert workers and os.getpid() not in {int(w.rsplit(":", 1)[1]) for w in workers}  # not this process
    here = convert(root, str(tmp_path / "inline"), per_task=7, engine="inline")
    pool = convert(root, str(tmp_path / "pool"), per_task=7, engine="local", workers=2)
    assert tree_bytes(str(tmp_path / "inline")) == tree_bytes(str(tmp_path / "pool")) and pool.skipped == here.skipped
    assert len(pool.urls) == 8


def test_the_last_two_budgets_of_files_go_in_half_tasks(tmp_path, monkeypatch):
    """ImageFolder tasks hold about `budget` bytes of files each; the last 2 budgets go in tasks of half that."""
    for n in range(100):
        path = tmp_path / "pets" / f"c{n % 3}" / f"{n:03d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 100)
    monkeypatch.setattr(convert_module, "BYTES", (1000, 1000))  # 10,000 bytes: tasks of 10 files, then of 5
    sizes = [len(source.files) for source in convert_module.plan(str(tmp_path / "pets"))]
    assert sizes == [10] * 8 + [5] * 4
    assert [len(s.files) for s in convert_module.plan(str(tmp_path / "pets"), per_task=10)] == [10] * 10  # as asked
