"""``shardstream create``: build a dataset from a directory tree, an ImageFolder, a recipe file or JSON Lines.

SOURCE is a directory tree (files sharing a key form a sample), an ImageFolder, a recipe file or JSON Lines
(see the examples). Bytes are copied as they are, never decoded or re-encoded. ``--imagefolder`` adds a ``cls`` field (the class number) to every sample and writes the class list
beside the output: ``classes.txt``, one class name per line, line ``i`` (from 0) naming class ``i``. A class list
already there that names the same classes is kept (``train`` and ``val`` ImageFolders can share a folder);
another one, a symbolic link or a folder in its place is an error unless ``--overwrite``, which replaces the
name (never writing through a link).
``--shuffle`` writes the samples of a directory or recipe in a seeded random order (only the listing is
shuffled, so it costs nothing); JSON Lines keep their order (use ``shardstream shuffle`` afterwards).
``-j N`` writes the shards of a directory or recipe on N processes when their boundaries are known in advance
(a shard pattern with ``--maxcount``, no ``--maxsize``); the bytes are the same as with one process.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import random
import stat
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import ConfigError
from ..io.files import write_file
from ..redact import redacting_logger
from ._common import Progress, key_rule, local_path, message, opened
from ._options import command, examples
from ._output import SampleOutput, add_output_options, finish, is_pattern, output_options, shard_name
from ._parallel import WORKERS_HELP, can_write_in_parallel, count_pieces, summary, write_parallel
from ._sources import Planned, jsonl_samples, recipe_samples, tree_samples

__all__ = ["register", "run"]

log = redacting_logger(__name__)

EXAMPLES = examples(
    "shardstream create images/ -o images.tar",
    "shardstream create images/ --imagefolder --shuffle --seed 0 -o 'train/train-%06d.tar' --maxcount 10",
    "shardstream create recipe.txt -o recipe.tar",
    "shardstream create samples.jsonl -o 'captions-%06d.tar' --maxsize 1M",
    "shardstream create images/ --imagefolder --dry-run --json -o preview.tar",
    "shardstream create images/ -j 2 --maxcount 2 -o 'parallel/images-%06d.tar'",
    "printf 'x.txt text:hello\\nx.cls text:1\\n' | shardstream create - -o hello.tar",
    note="Directory: files sharing a key (path up to the first dot of the name) form a sample; member names are\n"
    "the relative paths. --imagefolder: ROOT/<class>/<file>, adds .cls (classes sorted, numbered from 0) and\n"
    "writes classes.txt (one class name per line) beside the output.\n"
    "Recipe: lines 'archive-name source'; source = path (relative to the recipe), text:CONTENT, or pipe:CMD\n"
    "(only with --allow-commands). JSON Lines: one object per line; '__key__', 'EXT': text or JSON value,\n"
    "'EXT.b64': base64 bytes, 'EXT.path': a source as in recipes.",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "create", "build a dataset from files, a recipe or JSONL", __doc__, EXAMPLES)
    p.add_argument("source", metavar="SOURCE", help="a directory, a recipe file, a JSON Lines file (.jsonl), or - "
                                                    "(standard input)")
    p.add_argument("--from", dest="kind", choices=("auto", "dir", "recipe", "jsonl"), default="auto",
                   help="what SOURCE is (default: a directory is a tree, *.jsonl/*.ndjson JSON Lines, else a recipe)")
    add_output_options(p, workers=WORKERS_HELP)
    p.add_argument("--imagefolder", action="store_true",
                   help="top-level folders are classes: add a .cls field and write classes.txt")
    p.add_argument("--class-list", metavar="PATH",
                   help="where to write the class list (default: classes.txt beside the output)")
    p.add_argument("--shuffle", action="store_true", help="write the samples in a random order (directory/recipe)")
    p.add_argument("--seed", type=int, help="random seed of --shuffle (default 0)")
    p.add_argument("--allow-commands", "--allow-pipe", dest="allow_pipe", action="store_true",
                   help="allow pipe:CMD sources (runs shell commands: trusted files only)")
    p.add_argument("--include-hidden", action="store_true", help="include files and folders starting with '.'")
    p.set_defaults(run=run)


def _peek_kind(stream: io.TextIOBase) -> tuple[str, Iterator[str]]:
    """stdin: JSON Lines when the first non-blank line starts with '{', else a recipe."""
    lines = iter(stream)
    head = []
    for line in lines:
        head.append(line)
        if line.strip():
            break
    first = head[-1].lstrip() if head else ""
    return ("jsonl" if first.startswith("{") else "recipe"), itertools.chain(head, lines)


def _kind(args: argparse.Namespace) -> str:
    if args.kind != "auto" or args.source == "-":
        return args.kind
    if os.path.isdir(args.source):
        return "dir"
    lowered = args.source.lower()
    return "jsonl" if lowered.endswith((".jsonl", ".ndjson")) else "recipe"


def run(args: argparse.Namespace) -> int:
    kind = _kind(args)
    if args.imagefolder and kind != "dir":
        raise ConfigError("--imagefolder needs a directory as SOURCE")
    if args.seed is not None and not args.shuffle:
        raise ConfigError("--seed needs --shuffle")
    rule = key_rule(args, lowercase=False)
    if kind == "dir":
        planned, classes, skipped = tree_samples(args.source, rule, imagefolder=args.imagefolder,
                                                 include_hidden=args.include_hidden)
        if skipped:
            shown = ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else "")
            message(args, f"skipped {len(skipped)} files (hidden, no extension, or outside a class folder): {shown}")
        return _write_planned(args, planned, classes)
    path = local_path(args.source)
    base = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
    with opened(args.source) as stream:
        lines: Any = io.TextIOWrapper(stream, encoding="utf-8")
        if kind == "auto":
            kind, lines = _peek_kind(lines)
        if kind == "recipe":
            planned = recipe_samples("".join(lines), args.source, base, rule, args.allow_pipe)
        elif args.shuffle:
            raise ConfigError("--shuffle works on directories and recipes; for JSON Lines use 'shardstream shuffle'")
        else:
            return _write(args, jsonl_samples(lines, args.source, base, args.allow_pipe), None, [])
    return _write_planned(args, planned, [])


def _load(piece: list[Planned]) -> Iterator[dict[str, Any]]:
    return (p.load() for p in piece)


def _write_planned(args: argparse.Namespace, planned: list[Planned], classes: list[str]) -> int:
    if args.shuffle:
        random.Random(args.seed or 0).shuffle(planned)
    if can_write_in_parallel(args):
        class_list = _class_list_path(args) if classes else None
        write_list = _check_class_list(args, class_list, classes)
        pieces = [planned[a:b] for a, b in count_pieces(len(planned), args.maxcount)]
        result = write_parallel(args, "create", _load, pieces)
        _write_class_list(args, class_list if write_list else None, classes)
        return finish(args, "create", {**result, "classes": classes, "class_list": class_list}, summary(result))
    return _write(args, _load(planned), len(planned), classes)


def _class_text(classes: list[str]) -> bytes:
    return "".join(f"{name}\n" for name in classes).encode("utf-8")


def _existing(path: str, limit: int) -> bytes | str:
    """The first ``limit`` bytes of the regular file ``path``, or what else is there (read without following a
    symbolic link, and without waiting on a FIFO)."""
    if os.path.islink(path):
        return "is a symbolic link (its target is never written)"
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "is not a regular file"
        return f.read(limit)


def _check_class_list(args: argparse.Namespace, class_list: str | None, classes: list[str]) -> bool:
    """Whether the class list must be written: not when the file holds this very list already (shards of several
    ImageFolders with the same classes, e.g. train and val, go in one folder). Anything else in its place (another
    list, a symbolic link, a folder) is a ConfigError unless ``--overwrite`` (which replaces the name, never a
    link's target)."""
    if not class_list or not os.path.lexists(class_list):
        return bool(class_list)
    want = _class_text(classes)
    got = _existing(class_list, len(want) + 1)
    if got == want:
        return False
    if args.overwrite and (os.path.islink(class_list) or not os.path.isdir(class_list)):
        return True
    if isinstance(got, str):
        problem = got
    else:
        names = got.decode("utf-8", "replace").splitlines()
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        problem = (f"lists other classes ({shown or 'none'}{'' if len(got) <= len(want) else ', or more'}) than this "
                   f"ImageFolder's {len(classes)} ({', '.join(classes[:5])}{', ...' if len(classes) > 5 else ''})")
    raise ConfigError(f"the class list {class_list!r} {problem}; pass --overwrite to replace it, or --class-list "
                      "PATH to write it elsewhere")


def _write_class_list(args: argparse.Namespace, class_list: str | None, classes: list[str]) -> None:
    if class_list and not args.dry_run:
        write_file(class_list, _class_text(classes), "the class list")


def _write(args: argparse.Namespace, samples: Iterable[dict[str, Any]], total: int | None, classes: list[str]) -> int:
    class_list = _class_list_path(args) if classes else None
    write_list = _check_class_list(args, class_list, classes)
    with SampleOutput(args.output, **output_options(args)) as out, Progress(args, desc="create", total=total) as bar:
        for sample in samples:
            out.write(sample)
            bar.update()
    _write_class_list(args, class_list if write_list else None, classes)
    result = {**out.result(), "classes": classes, "class_list": class_list}
    return finish(args, "create", result, out.summary() + (f"; {len(classes)} classes in {class_list}"
                                                           if class_list else ""))


def _class_list_path(args: argparse.Namespace) -> str | None:
    if args.class_list:
        return args.class_list
    if args.output == "-":
        log.warning("the class list is not written when the output is '-'; pass --class-list PATH")
        return None
    first = shard_name(args.output, 0) if is_pattern(args.output) else args.output
    return os.path.join(os.path.dirname(first), "classes.txt")
