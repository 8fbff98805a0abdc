"""Installs the exit check (gloo_exitcheck.py) in every Python process that :func:`harness.launch` starts."""

import gloo_exitcheck

gloo_exitcheck.install()
