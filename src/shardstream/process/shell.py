"""A shell command applied to each sample (``shardstream map --allow-shell``), tarproc's ``tarpcat -c`` style.

The sample's fields are written as files ``sample.EXT`` into a fresh temporary directory, the command runs
there (``sh -c COMMAND``), and every file ``sample.EXT`` left in the directory afterwards forms the output
sample (same key). A command that exits with a non-zero status fails the sample with its stderr.

Running a command is an explicit opt-in: :class:`ShellCommand` refuses to be created without
``allow_shell=True``, so no command named in data or configuration runs by accident.

>>> upper = ShellCommand("tr a-z A-Z < sample.txt > sample.out.txt && rm sample.txt", allow_shell=True)
>>> upper({"__key__": "k", "txt": b"hello"})
{'__key__': 'k', 'out.txt': b'HELLO'}
>>> ShellCommand("rm -rf /")
Traceback (most recent call last):
...
shardstream.errors.ConfigError: running the shell command 'rm -rf /' per sample needs an explicit opt-in: allow_shell=True (--allow-shell on the command line)
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Any

from ..errors import ConfigError

__all__ = ["ShellCommand"]

_BASE = "sample"


class ShellCommand:
    """Run ``command`` in a shell once per sample (see the module docstring); picklable."""

    def __init__(self, command: str, *, allow_shell: bool = False, timeout: float | None = None):
        if not allow_shell:
            raise ConfigError(f"running the shell command {command!r} per sample needs an explicit opt-in: "
                              "allow_shell=True (--allow-shell on the command line)")
        if not command.strip():
            raise ConfigError("the shell command is empty")
        self.command, self.timeout = command, timeout

    def describe(self) -> str:
        return f"shell:{self.command}"

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        key = sample.get("__key__")
        with tempfile.TemporaryDirectory(prefix="shardstream-map-") as work:
            for field, value in sample.items():
                if field.startswith("__"):
                    continue
                if "/" in field or field.startswith("."):
                    raise ConfigError(f"sample {key!r}: field {field!r} cannot be a file name")
                data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
                with open(os.path.join(work, f"{_BASE}.{field}"), "wb") as f:
                    f.write(data)
            done = subprocess.run(["sh", "-c", self.command], cwd=work, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=self.timeout)  # fmt: skip
            if done.returncode != 0:
                tail = done.stderr.decode("utf-8", "replace").strip()[-500:]
                raise RuntimeError(f"sample {key!r}: {self.command!r} exited with status {done.returncode}: {tail}")
            out: dict[str, Any] = {"__key__": key}
            for name in sorted(os.listdir(work)):
                if name.startswith(_BASE + ".") and os.path.isfile(os.path.join(work, name)):
                    with open(os.path.join(work, name), "rb") as f:
                        out[name[len(_BASE) + 1 :]] = f.read()
            return out
