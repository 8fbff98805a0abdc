#!/usr/bin/env bash
# Print the path of a CPython X.Y interpreter for `make test-pythons`:
#   1. a pyenv build of X.Y that is already installed (the newest one),
#   2. pythonX.Y on PATH (e.g. a Debian python3.X package),
#   3. otherwise pyenv builds the newest X.Y it knows (minutes; needs a C toolchain).
set -euo pipefail
version=${1:?usage: find-python.sh X.Y}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
pyenv=$(command -v pyenv || true)
[ -z "$pyenv" ] && [ -x "$PYENV_ROOT/bin/pyenv" ] && pyenv=$PYENV_ROOT/bin/pyenv
if [ -n "$pyenv" ] && installed=$("$pyenv" latest "$version" 2>/dev/null); then
    echo "$("$pyenv" root)/versions/$installed/bin/python$version"
elif command -v "python$version" >/dev/null && "python$version" -c '' 2>/dev/null; then
    command -v "python$version"
elif [ -n "$pyenv" ]; then
    known=$("$pyenv" latest -k "$version")
    echo "building Python $known with pyenv (minutes)..." >&2
    "$pyenv" install -s "$known" >&2
    echo "$("$pyenv" root)/versions/$known/bin/python$version"
else
    echo "find-python.sh: no Python $version here; install pyenv or a python$version package" >&2
    exit 1
fi
