#!/usr/bin/env bash
# Create one virtual environment per peer library for benchmarks/peers/bench_peers.py (make bench-peers):
#   .venv-peers-litdata  litdata (PyPI)
#   .venv-peers-dali     nvidia-dali-cuda130 (runs on the CPU with device_id=None)
#   .venv-peers-ffcv     ffcv==1.0.2 (compiles against Debian libopencv-dev libturbojpeg0-dev pkg-config: apt-get
#                        installs them when missing, as root or with password-less sudo; else ffcv is skipped)
#   .venv-peers-streaming  mosaicml-streaming (MDSWriter; benchmarks/bench_convert.py)
#   .venv-peers-webdataset webdataset==1.0.2 (ShardWriter; benchmarks/bench_convert.py)
# torch==2.13.0 (CPU wheel) is installed FIRST in each, so that no peer pulls a CUDA build of torch.
# A peer that cannot be installed here is reported with the reason, and the others go on.
# Usage: benchmarks/peers/setup.sh [litdata] [dali] [ffcv] [streaming] [webdataset]   (default: the first four)
set -u
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3}"
TORCH="torch==2.13.0"
TORCH_INDEX="${TORCH_INDEX:-}"  # e.g. https://download.pytorch.org/whl/cpu; default: pip's configured index, as the Makefile
peers=("$@")
[ ${#peers[@]} -eq 0 ] && peers=(litdata dali ffcv streaming)
status=()

make_venv() {  # make_venv NAME: create .venv-peers-NAME with pip and CPU torch; 0 on success
    local venv=".venv-peers-$1"
    if [ ! -x "$venv/bin/python" ]; then
        "$PYTHON" -m venv "$venv" || return 1
    fi
    "$venv/bin/python" -m pip install -q --upgrade pip || return 1
    "$venv/bin/python" -c "import torch" 2>/dev/null && return 0
    if [ -n "$TORCH_INDEX" ]; then
        "$venv/bin/python" -m pip install -q "$TORCH" --index-url "$TORCH_INDEX"
    else
        "$venv/bin/python" -m pip install -q "$TORCH"
    fi
}

# shardstream's own runtime dependencies (pyproject's `dependencies`): bench_peers.py's worker imports shardstream from
# src/ in every peer's venv (the shared data and the JPEG work); without them every peer fails on `import msgpack`
SHARDSTREAM_DEPS=(numpy Pillow msgpack pyyaml fsspec tqdm)

install_peer() {  # install_peer NAME PIP-ARGS... ; also installs shardstream's dependencies for the shared workloads
    local name=$1; shift
    local venv=".venv-peers-$name" log="/tmp/shardstream-peers-$name.log"
    echo "== $name -> $venv (log: $log)"
    if ! make_venv "$name" >"$log" 2>&1; then
        echo "   SKIPPED $name: could not create the venv with $TORCH (see $log)"; status+=("$name: skipped"); return
    fi
    # the constraint keeps torch at the version installed above, whatever the peer asks for
    echo "$TORCH" >"$venv/constraints.txt"
    if ! "$venv/bin/python" -m pip install -q -c "$venv/constraints.txt" "${SHARDSTREAM_DEPS[@]}" "$@" >>"$log" 2>&1; then
        echo "   SKIPPED $name: pip install $* failed; last lines of $log:"
        tail -n 5 "$log" | sed 's/^/     /'
        status+=("$name: skipped"); return
    fi
    echo "   ok"; status+=("$name: ok")
}

ensure_debian_packages() {  # ensure_debian_packages PKG...: apt-get installs the missing ones (as root, or with sudo)
    local missing=() pkg sudo=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local cmd="apt-get install -y --no-install-recommends ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            echo "== ffcv"
            echo "   SKIPPED ffcv: it compiles against Debian packages that are missing: ${missing[*]}"
            echo "   (not root and no password-less sudo; run: sudo $cmd && $0 ffcv)"
            return 1
        fi
    fi
    local log=/tmp/shardstream-peers-apt.log
    echo "== apt-get: ${missing[*]} (for ffcv; log: $log)"
    # the package lists may be stale (or absent in a fresh container): update once if the first try fails
    if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" $cmd >"$log" 2>&1; then
        "${sudo[@]}" apt-get update >>"$log" 2>&1
        if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" $cmd >>"$log" 2>&1; then
            echo "   SKIPPED ffcv: '${sudo[*]} $cmd' failed; last lines of $log:"
            tail -n 5 "$log" | sed 's/^/     /'
            return 1
        fi
    fi
    echo "   ok"
}

for peer in "${peers[@]}"; do
    case "$peer" in
        litdata) install_peer litdata litdata==0.2.76 ;;  # the versions issue 17 measured
        streaming)  # no torchvision build matches torch 2.13: remove what pip pulled in (bench_convert.py stubs it)
            install_peer streaming mosaicml-streaming==0.13.0
            .venv-peers-streaming/bin/python -m pip uninstall -y -q torchvision >/dev/null 2>&1 ;;
        webdataset) install_peer webdataset webdataset==1.0.2 ;;
        dali) install_peer dali ${DALI_INDEX:+--extra-index-url "$DALI_INDEX"} nvidia-dali-cuda130==2.4.0 ;;  # on PyPI; or DALI_INDEX=https://pypi.nvidia.com
        ffcv)
            if ! ensure_debian_packages libopencv-dev libturbojpeg0-dev pkg-config; then
                status+=("ffcv: skipped"); continue
            fi
            install_peer ffcv numba opencv-python-headless ffcv==1.0.2 ;;
        *) echo "unknown peer $peer (litdata, dali, ffcv, streaming, webdataset)"; exit 2 ;;
    esac
done
echo "== peers: ${status[*]}"
exit 0
