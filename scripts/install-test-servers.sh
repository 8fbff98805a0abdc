#!/usr/bin/env bash
# Install the real servers the remote-shard tests start on 127.0.0.1 (tests/io/remote_servers.py):
# nginx (HTTP with Range) and Ceph RadosGW (S3), and Chromium for the viewer's browser tests: Debian/Ubuntu
# packages, about 180 MB. Azurite (Azure Blob Storage, tests/io/azure_server.py): the npm package, into
# .test-servers/azurite (about 60 MB; needs node and npm).
# Idempotent: does nothing when the binaries are there. Always exits 0: a machine where the packages cannot be
# installed still runs the suite, and the tests that need a missing server skip, saying why.
set -u
cd "$(dirname "$0")/.." || exit 0

# Azurite: 3.35.0 is the last release that runs on node 20 (3.36 wants node >= 21)
AZURITE_VERSION=3.35.0
if [ -x .test-servers/azurite/node_modules/.bin/azurite-blob ]; then
    echo "install-test-servers: Azurite is installed"
elif ! command -v npm >/dev/null 2>&1; then
    echo "install-test-servers: no npm here; the Azure (Azurite) tests skip (install node and npm, then run this again)"
elif npm install --prefix .test-servers/azurite --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" \
        >/tmp/install-test-servers-npm.log 2>&1; then
    echo "install-test-servers: Azurite $AZURITE_VERSION installed in .test-servers/azurite"
else
    echo "install-test-servers: npm install azurite failed (see /tmp/install-test-servers-npm.log); the Azure tests skip"
fi

need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
for bin in ceph-mon ceph-osd radosgw radosgw-admin; do
    command -v "$bin" >/dev/null 2>&1 || { need+=(ceph-mon ceph-osd radosgw); break; }
done
command -v uuidgen >/dev/null 2>&1 || need+=(uuid-runtime)
command -v chromium >/dev/null 2>&1 || need+=(chromium)  # the viewer's browser tests (tests/viewer)

if [ ${#need[@]} -eq 0 ]; then
    echo "install-test-servers: nginx, Ceph RadosGW and chromium are installed"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-servers: no apt-get here; install ${need[*]} by hand, or the tests that need them skip"
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo -n"
    else
        echo "install-test-servers: not root and no password-less sudo; cannot install ${need[*]}; the tests that need them skip"
        exit 0
    fi
fi

echo "install-test-servers: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/tmp/install-test-servers.log 2>&1; then
    # package lists may be missing or stale: update once and try again
    if ! { $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends "${need[@]}"; } \
            >>/tmp/install-test-servers.log 2>&1; then
        echo "install-test-servers: apt-get failed (see /tmp/install-test-servers.log):"
        tail -n 5 /tmp/install-test-servers.log | sed 's/^/    /'
        echo "install-test-servers: the tests that need ${need[*]} will skip"
        exit 0
    fi
fi
echo "install-test-servers: done"
exit 0
