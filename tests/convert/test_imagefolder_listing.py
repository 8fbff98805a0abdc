"""The ImageFolder listing (one scandir per folder) gives what the os.walk rule gives: the same files in the
same order, the same sizes (links followed), the same skipped files; hidden folders and links to folders are
not entered."""

from __future__ import annotations

import os

from shardstream.convert.folders import list_imagefolder

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
