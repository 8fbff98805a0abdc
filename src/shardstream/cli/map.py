"""``shardstream map``: apply a Python function (``module:function``) or a shell command to every sample of a
dataset and write new shards, in parallel (tarproc's ``tarpcat -c``, on a process pool or a Dask cluster).

The function receives a sample dict (``__key__`` and one bytes value per field) and returns a dict (the new
sample; the key is kept unless it sets one), a list of dicts, or None (the sample is dropped); with
--per shard it receives an iterator of samples and returns an iterable. A shell command runs once per sample
in a temporary folder holding the fields as files sample.EXT; the files sample.EXT left there form the output
sample. Commands run only with --allow-shell. INPUT is what every command reads (shards, directories, globs,
brace patterns, specs). Output shards (``-o DEST``), resuming (``--redo``) and retries are as in
'shardstream convert'.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from ..errors import ConfigError
from ..process import ShardSource, ShellCommand, TarOutput, Task, map_dataset
from ._inputs import INPUT_HELP, resolve_inputs
from ._jobs import add_job_options, dry_run, finish, job_kwargs, output_of
from ._options import command, examples

__all__ = ["load_function", "register", "run"]

EXAMPLES = examples(
    "shardstream map 'shards-{000000..000003}.tar' -o upper/ --shell 'tr a-z A-Z < sample.txt > sample.out.txt' "
    "--allow-shell -j 2",
    "shardstream map dataset.tar -o small/ --function transforms:drop_json --on-error skip --engine inline",
    "shardstream map dataset.tar -o small/ --function transforms:drop_json --dry-run --json",
    note="--function MODULE:NAME imports MODULE (the current directory is on the path) and calls NAME.",
)


def register(sub: Any, parents: dict[str, argparse.ArgumentParser]) -> None:
    p = command(sub, parents, "map", "apply a function or command to every sample, in parallel", __doc__, EXAMPLES,
                usage="%(prog)s INPUT [INPUT ...] -o DEST (--function MODULE:NAME | --shell COMMAND) [options]")
    p.add_argument("source", nargs="+", metavar="INPUT", help=INPUT_HELP)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--function", "-f", metavar="MODULE:NAME", help="a Python function to apply")
    what.add_argument("--shell", "-c", metavar="COMMAND", help="a shell command run per sample (--allow-shell)")
    p.add_argument("--allow-shell", action="store_true", help="allow --shell to run commands")
    p.add_argument("--per", choices=("sample", "shard"), default="sample", help="what the function receives")
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help="a sample whose function fails: fail its task (default) or skip and report it")
    p.add_argument("--version", dest="fn_version", default="", metavar="TEXT",
                   help="a version of the function: a rerun with another version redoes every task")
    add_job_options(p)
    p.set_defaults(run=run)


def load_function(spec: str) -> Any:
    """Import ``module:name`` (dots in ``name`` reach attributes); the current directory is importable."""
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ConfigError(f"--function {spec!r}: expected MODULE:NAME, e.g. mypackage.transforms:resize")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"--function {spec!r}: {type(e).__name__}: {e}") from e
    if not callable(target):
        raise ConfigError(f"--function {spec!r} is not callable")
    return target


def run(args: argparse.Namespace) -> int:
    sources, dest = output_of(args, "map")
    if args.shell is not None:
        fn: Any = ShellCommand(args.shell, allow_shell=args.allow_shell)
    else:
        if args.allow_shell:
            raise ConfigError("--allow-shell goes with --shell")
        fn = load_function(args.function)
    urls = resolve_inputs(sources)
    if args.dry_run:
        output = TarOutput(dest, prefix=args.prefix, maxcount=args.maxcount, maxsize=args.maxsize, index=args.index)
        tasks = [Task(i, ShardSource(url, args.key_rule), output, fn, args.per, args.on_error, args.fn_version)
                 for i, url in enumerate(urls)]
        return dry_run(args, "map", dest, tasks)
    kwargs = job_kwargs(args)
    return finish(args, "map", dest, lambda: map_dataset(urls, dest, fn, per=args.per, on_error=args.on_error,
                                                         version=args.fn_version, rule=args.key_rule, **kwargs))
