#!/bin/bash
# Runs every test: installs missing Debian packages, builds everything and
# the guest images, runs `bazel test //...`, and ends with the line
# "N passed, N failed" (test cases, counted from each test's XML report).
# Never leaves a Bazel server behind.
set -uo pipefail
cd "$(dirname "$0")/.."
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO tools/install_deps.sh --tests || exit 1

# Stale convenience symlinks from another output root make `//...` descend
# into bazel-<dir>/external/... and fail; Bazel recreates them.
find . -maxdepth 1 -type l -name 'bazel-*' -delete
trap 'bazel shutdown >/dev/null 2>&1 || true' EXIT

export AIRLOCK_IMAGE_DIR=${AIRLOCK_IMAGE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock/images}
# The kernel and templates need nothing Bazel builds (mostly downloads and
# dpkg): they are made while it builds; the initramfs needs the agent.
IMAGES_LOG=$(mktemp)
$SUDO env AIRLOCK_IMAGE_DIR="$AIRLOCK_IMAGE_DIR" tools/build_images.sh templates \
  >"$IMAGES_LOG" 2>&1 &
images_pid=$!
bazel build --config=ci //...
built=$?
wait "$images_pid"
images=$?
cat "$IMAGES_LOG" >&2; rm -f "$IMAGES_LOG"
[ "$built" -eq 0 ] && [ "$images" -eq 0 ] || { echo "0 passed, 1 failed"; exit 1; }
$SUDO env AIRLOCK_IMAGE_DIR="$AIRLOCK_IMAGE_DIR" tools/build_images.sh initramfs ||
  { echo "0 passed, 1 failed"; exit 1; }

LOG=$(mktemp)
bazel test --config=ci --keep_going --test_env=AIRLOCK_IMAGE_DIR="$AIRLOCK_IMAGE_DIR" \
  --test_env=HOME="$HOME" "$@" //... 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
TESTLOGS=$(bazel info --config=ci bazel-testlogs 2>/dev/null)
python3 tools/count_tests.py "$LOG" "$TESTLOGS"
rm -f "$LOG"
exit "$rc"
