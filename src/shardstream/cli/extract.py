"""``shardstream extract``: unpack the samples of a dataset into a directory, safely.

Each field becomes the file ``DIR/KEY.EXT`` (``-o DIR``) (the member's name in the tar). Names that could write outside
``DIR`` are refused with a message and skipped: absolute paths, ``..`` components, backslashes, NUL. Links in
the tar are never followed or created (the reader skips them), and a path that would go through a symbolic
link already present under ``DIR`` is refused too, as is an existing file, unless ``--overwrite`` (which still
never writes through a link). Anything refused makes the exit status 1.

>>> unsafe_reason("a/../../etc/passwd"), unsafe_reason("/etc/passwd"), unsafe_reason("./cat/0001.jpg")
("'..' component", 'absolute path', None)
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from typing import Any

from ..redact import redacting_logger
from ._common import (
    EXIT_PROBLEMS,
    EXIT_USAGE,
    CommandError,
    fields,
    key_rule,
    message,
    plural,
    positive_int,
    progress,
    shard_samples,
)
from ._inputs import resolve_inputs
from ._options import add_inputs, add_old_spelling, add_options, command, examples

__all__ = ["register", "run", "unsafe_reason", "write_member"]

log = redacting_logger(__name__)

EXAMPLES = examples(
    "shardstream extract dataset.tar -o extracted/",
    "shardstream extract shards-*.tar -o labels/ --fields cls,txt --limit 5",
    "shardstream extract dataset.tar -o extracted/ --overwrite",
    "shardstream extract dataset.tar -o elsewhere/ --limit 2 --dry-run",
    "shardstream extract dataset.tar -o elsewhere/ --limit 1 --json",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "extract", "unpack samples into a directory, safely", __doc__, EXAMPLES,
                usage="%(prog)s INPUT [INPUT ...] -o DIR [options]")
    add_inputs(p)
    add_options(p, output="the directory to write the files to (created); -C DIR is the old spelling",
                output_metavar="DIR", required_output=False,
                overwrite="replace existing files (never through links)",
                dry_run="print the paths that would be written; write nothing",
                json="print the result (files written, names refused) as one JSON document on stdout")
    add_old_spelling(p, "-C", "--directory", dest="output", new="-o DIR", metavar="DIR")
    p.add_argument("--fields", metavar="EXT,...", help="only these extensions (comma-separated)")
    p.add_argument("--limit", type=positive_int, metavar="N", help="only the first N samples")
    p.set_defaults(run=run)


def unsafe_reason(name: str) -> str | None:
    """Why ``name`` must not be extracted, or None when it stays inside the destination."""
    if not name or "\0" in name:
        return "empty name or NUL"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    if "\\" in name:
        return "backslash"
    if ".." in name.split("/"):
        return "'..' component"
    return None


def write_member(root: str, name: str, data: bytes, *, overwrite: bool = False, dry_run: bool = False
                 ) -> str | None:
    """Write ``data`` to ``root/name``; returns why it was refused, or None when written (``dry_run``: when it
    would be written; nothing is created)."""
    reason = unsafe_reason(name)
    if reason is not None:
        return reason
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        return "empty name"
    path = root
    for part in parts[:-1]:
        path = os.path.join(path, part)
        if os.path.islink(path):
            return f"{path!r} is a symbolic link"
        if dry_run and not os.path.lexists(path):
            continue
        if not os.path.isdir(path):
            if dry_run:
                return f"{path!r} exists and is not a directory"
            try:
                os.mkdir(path)
            except FileExistsError:
                return f"{path!r} exists and is not a directory"
    target = os.path.join(path, parts[-1])
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_TRUNC if overwrite else os.O_EXCL
    if os.path.islink(target):
        return f"{target!r} is a symbolic link"
    if dry_run:
        if os.path.isdir(target):
            return f"{target!r} is a directory"
        return f"{target!r} exists (--overwrite replaces it)" if os.path.exists(target) and not overwrite else None
    try:
        fd = os.open(target, flags, 0o666)
    except FileExistsError:
        return f"{target!r} exists (--overwrite replaces it)"
    except IsADirectoryError:
        return f"{target!r} is a directory"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return f"{target!r} is a symbolic link"
        raise
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return None


def run(args: argparse.Namespace) -> int:
    if args.output is None:
        raise CommandError("give the directory to extract to: -o DIR", EXIT_USAGE)
    rule = key_rule(args, lowercase=False)
    wanted = {f.strip() for f in args.fields.split(",") if f.strip()} if args.fields else None
    root = args.output
    if not args.dry_run:
        os.makedirs(root, exist_ok=True)
    samples = 0
    paths: list[str] = []
    refused: list[dict[str, str]] = []

    def all_samples() -> Any:
        for url in resolve_inputs(args.inputs):
            yield from shard_samples(url, rule)

    for sample in progress(args, all_samples(), desc="extract"):
        if args.limit is not None and samples >= args.limit:
            break
        samples += 1
        key = sample["__key__"]
        for ext, data in fields(sample):
            if wanted is not None and ext not in wanted and ext.lower() not in wanted:
                continue
            name = f"{key}.{ext}"
            reason = write_member(root, name, data, overwrite=args.overwrite, dry_run=args.dry_run)
            if reason is None:
                paths.append(os.path.join(root, name))
                if args.dry_run and not args.json:
                    print(paths[-1])
            else:
                refused.append({"name": name, "url": sample["__url__"], "reason": reason})
                log.warning("refused %r from %s: %s", name, sample["__url__"], reason)
    if args.json:
        json.dump({"command": "extract", "output": root, "dry_run": args.dry_run, "samples": samples, "files": paths,
                   "refused": refused}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    verb = "dry run: would extract" if args.dry_run else "extracted"
    message(args, f"{verb} {plural(len(paths), 'file')} of {plural(samples, 'sample')} to {root}"
            + (f"; refused {len(refused)}" if refused else ""))
    return EXIT_PROBLEMS if refused else 0
