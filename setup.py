"""Build hook: the optional C accelerator (``shardstream._native._scan``: the tar header walk, the grouping, ...).

The pure-Python path is always installed and tested; the extension is ``optional`` so a machine without a
C compiler still installs shardstream (``shardstream.tar.accelerated()`` tells which path is in use).

Build switches (environment variables of the build, not of the library):

- ``SHARDSTREAM_NO_EXTENSIONS=1``: no extension at all; the wheel is the pure ``py3-none-any`` one.
- ``SHARDSTREAM_REQUIRE_EXTENSIONS=1``: a failed compile fails the build (cibuildwheel sets it, so a platform
  wheel never ships without its accelerator).
"""
import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_HOME = os.path.join("src", "shardstream", "_native")  # the accelerator's home: its C sources and its loader
_SRC = os.path.join(_HOME, "_scan.c")  # the module; _scan_*.c: its parts; _scan*.h: headers


class BuildExt(build_ext):
    """Optimisation flags in the spelling of the compiler in use (MSVC or a GCC/Clang-style one)."""

    def build_extensions(self):
        flag = "/O2" if self.compiler.compiler_type == "msvc" else "-O3"
        for ext in self.extensions:
            ext.extra_compile_args = [*ext.extra_compile_args, flag]
        super().build_extensions()


ext_modules = []
if os.path.exists(_SRC) and not os.environ.get("SHARDSTREAM_NO_EXTENSIONS"):
    optional = not os.environ.get("SHARDSTREAM_REQUIRE_EXTENSIONS")
    parts = sorted(glob.glob(os.path.join(_HOME, "_scan_*.c")))
    headers = sorted(glob.glob(os.path.join(_HOME, "_scan*.h")))
    ext_modules.append(Extension("shardstream._native._scan", [_SRC, *parts], depends=headers, optional=optional))

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExt})
