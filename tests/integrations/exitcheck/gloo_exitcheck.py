"""The exit check of the integration tests: once :func:`install`-ed (by ``sitecustomize.py`` beside this file, in
every Python process that :func:`harness.launch` starts: this folder is first on their PYTHONPATH), a process
that created a torch process group prints, at exit, whether gloo's threads had ended when
``destroy_process_group()`` returned and whether any still runs at exit (:func:`gloo_threads`).

Why: a process group that outlives ``destroy_process_group()`` (something still holds it) is destroyed during
the interpreter's shutdown; a gloo thread that then needs the GIL is ended by Python inside a C++ destructor and
the process aborts ("terminate called without an active exception"), now and then, under load. This check sees
the cause every time, not only when the race is lost. See docs/integrations.md, "Ending cleanly".

A thread that is exiting (flag PF_EXITING in /proc/self/task/TID/stat: joined, still being reaped) counts as
ended, so the check does not depend on timing.
"""

from __future__ import annotations

import atexit
import functools
import importlib.machinery
import os
import sys
from typing import Any

MARK = "shardstream-exitcheck"
_PF_EXITING = 0x4
_seen: dict[str, Any] = {"initialized": False, "after_destroy": None}


def gloo_threads() -> list[str]:
    """The names of this process's gloo threads that are not exiting."""
    found = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        flags = int(stat[stat.rindex(")") + 2:].split()[6])
        if "gloo" in name and not flags & _PF_EXITING:
            found.append(name)
    return sorted(found)


def _wrap(module: Any) -> None:
    init, destroy = module.init_process_group, module.destroy_process_group

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        _seen["initialized"] = True
        return init(*args, **kwargs)

    @functools.wraps(destroy)
    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        result = destroy(*args, **kwargs)
        if not module.is_initialized():  # the default group (all of them) went
            _seen["after_destroy"] = gloo_threads()
        return result

    module.init_process_group, module.destroy_process_group = init_process_group, destroy_process_group


class _Finder:
    """Wraps ``torch.distributed``'s two functions as soon as it is imported (before anyone copies them)."""

    @staticmethod
    def find_spec(name: str, path: Any, target: Any = None) -> Any:
        if name != "torch.distributed":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            if hasattr(module, "destroy_process_group"):
                _wrap(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _report() -> None:
    if _seen["initialized"]:
        line = f"{MARK} pid={os.getpid()} after_destroy={_seen['after_destroy']} at_exit={gloo_threads()}\n"
        sys.stdout.write(line)  # one write: the ranks share the output, and print() writes the end apart
        sys.stdout.flush()


def install() -> None:
    """Wrap ``torch.distributed``'s two functions when it is imported, and report at exit."""
    sys.meta_path.insert(0, _Finder())  # type: ignore[arg-type]
    atexit.register(_report)
