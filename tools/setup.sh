#!/bin/bash
# Sets Airlock up on this machine: installs the Debian packages it needs,
# builds every binary, builds the guest images (kernel, base template,
# initramfs), installs the binaries into $PREFIX/bin (default /usr/local)
# and starts the daemons. Safe to run again: finished steps are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-/usr/local}
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo

echo "==> Debian packages" >&2
$SUDO tools/install_deps.sh
echo "==> building (bazel)" >&2
find . -maxdepth 1 -type l -name 'bazel-*' -delete
bazel build --config=ci //cli:airlock //vmmd //proxyd //secretsd //gitd //policyd //apid //guest:airlock-agent
bazel shutdown >/dev/null 2>&1 || true
echo "==> guest images" >&2
export AIRLOCK_IMAGE_DIR=${AIRLOCK_IMAGE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock/images}
$SUDO env AIRLOCK_IMAGE_DIR="$AIRLOCK_IMAGE_DIR" tools/build_images.sh all
echo "==> installing into $PREFIX/bin" >&2
$SUDO mkdir -p "$PREFIX/bin"
for b in cli/airlock vmmd/vmmd proxyd/proxyd secretsd/secretsd gitd/gitd policyd/policyd apid/apid; do
  $SUDO install -m 0755 "bazel-bin/$b" "$PREFIX/bin/"
done
echo "==> network (split DNS, re-signed TLS)" >&2
$SUDO tools/configure_network.sh
echo "==> starting the daemons" >&2
"$PREFIX/bin/airlock" daemon start
