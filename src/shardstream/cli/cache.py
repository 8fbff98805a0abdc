"""``shardstream cache``: list and clear the local shard cache (see :mod:`shardstream.io.cache`).

The cache directory is ``--cache-dir`` or, when it is not given, ``SHARDSTREAM_CACHE_DIR``. ``list`` prints one
line per cached shard (size, last use, file name) and the total; ``clear`` removes every cached shard that no
process is reading right now (and leftovers of dead downloads); ``clear --max-size SIZE`` only removes the
least recently used shards until the cache fits in SIZE.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ..config import get_settings
from ..errors import ConfigError
from ..io.cache import ShardCache
from ._common import human, message, parse_size, plural
from ._options import command, examples

__all__ = ["register", "run"]

EXAMPLES = examples(
    "shardstream cache list --cache-dir shard-cache",
    "shardstream cache list --cache-dir shard-cache --json",
    "shardstream cache clear --cache-dir shard-cache --max-size 2K --dry-run",
    "shardstream cache clear --cache-dir shard-cache --max-size 2K",
    "shardstream cache clear --cache-dir shard-cache",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "cache", "list and clear the local shard cache", __doc__, EXAMPLES, read=False)
    p.add_argument("action", choices=("list", "clear"), help="list the cached shards, or remove them")
    p.add_argument("--cache-dir", metavar="DIR", help="the cache directory (default: SHARDSTREAM_CACHE_DIR)")
    p.add_argument("--max-size", type=parse_size, metavar="SIZE",
                   help="clear: keep the most recently used shards that fit in SIZE")
    p.add_argument("--json", action="store_true", help="list: machine-readable output")
    p.add_argument("--dry-run", action="store_true", help="clear: print what would be removed; remove nothing")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    directory = args.cache_dir or get_settings().cache_dir
    if not directory:
        raise ConfigError("no cache directory: pass --cache-dir DIR or set SHARDSTREAM_CACHE_DIR")
    if args.action == "list":
        if args.max_size is not None:
            raise ConfigError("--max-size applies to 'clear'")
        entries = ShardCache(directory).entries()
        if args.json:
            rows = [{"name": n, "bytes": size, "last_used": mtime} for n, (size, mtime) in sorted(entries.items())]
            json.dump({"directory": directory, "bytes": sum(r["bytes"] for r in rows), "shards": rows}, sys.stdout,
                      indent=2)
            sys.stdout.write("\n")
            return 0
        for name, (size, mtime) in sorted(entries.items(), key=lambda item: item[1][1]):
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime))
            print(f"{human(size):>10}  {used}  {name}")
        total = sum(size for size, _ in entries.values())
        print(f"{plural(len(entries), 'shard')}, {human(total)} in {directory}")
        return 0
    if args.json:
        raise ConfigError("--json applies to 'list'")
    cache = ShardCache(directory, max_bytes=args.max_size or 0)
    before = cache.entries()
    if args.dry_run:  # least recently used first, until what is left fits in --max-size (as evict does)
        left_bytes = sum(size for size, _ in before.values())
        removed = []
        for name, (size, _) in sorted(before.items(), key=lambda item: (item[1][1], item[0])):
            if left_bytes <= (args.max_size or 0):
                break
            removed.append(name)
            left_bytes -= size
            print(name)
        message(args, f"dry run: would remove {plural(len(removed), 'cached shard')} "
                      f"({human(sum(before[n][0] for n in removed))}) from {directory}")
        return 0
    removed = cache.evict()
    left = len(before) - len(removed)
    message(args, f"removed {plural(len(removed), 'cached shard')} ({human(sum(before[n][0] for n in removed))}) from "
            f"{directory}" + (f"; {left} kept" if left else ""))
    return 0
