#!/bin/bash
# Runs tests under one sanitizer: asan (AddressSanitizer), ubsan
# (UndefinedBehaviorSanitizer) or tsan (ThreadSanitizer, with
# tools/tsan.supp for the Debian libraries that are not instrumented).
# Each sanitizer builds into an output tree of its own (.bazelrc).
#
# usage: tools/sanitize.sh asan|ubsan|tsan [BAZEL TEST ARGS...] TARGET...
#   tools/sanitize.sh tsan //common:daemon_runtime_test //proxyd/...
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  asan|ubsan) config=$1; shift; exec bazel test --config="$config" "$@" ;;
  tsan)
    shift
    exec bazel test --config=tsan \
      --test_env=TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tools/tsan.supp" \
      "$@" ;;
  -h|--help|"") sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ]; exit $? ;;
  *) echo "sanitize.sh: unknown sanitizer $1 (asan, ubsan or tsan)" >&2; exit 2 ;;
esac
