"""Build hook: the optional C accelerator for the tar header walk.

The pure-Python path is always installed and tested; the extension is ``optional`` so a machine without a
C compiler still installs shardstream (``shardstream.tar.accelerated()`` tells which path is in use).
"""
import os

from setuptools import Extension, setup

_SRC = os.path.join("src", "shardstream", "tar", "_scan.c")
ext_modules = []
if os.path.exists(_SRC) and not os.environ.get("SHARDSTREAM_NO_EXTENSIONS"):
    ext_modules.append(Extension("shardstream.tar._scan", [_SRC], optional=True, extra_compile_args=["-O3"]))

setup(ext_modules=ext_modules)
