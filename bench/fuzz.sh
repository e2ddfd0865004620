#!/bin/bash
# Runs the libFuzzer targets in fuzz/ with clang (ASan + UBSan), each for
# SECONDS (default 600), starting from its checked-in seed corpus, and
# prints per target: executions, execs/s, coverage (libFuzzer's cov and ft
# counters) and crashes. A crash is written to fuzz/regressions/NAME/,
# where the normal test run (//fuzz:NAME_replay_test) replays it once it is
# fixed; this script exits 1 when any target crashed.
#
# usage: bench/fuzz.sh [--seconds N] [TARGET...]   (default: every target)
#
# policy_rule, api_json and egress_frames link generated protobuf code: the script first
# runs `bazel build` of their proto targets and compiles the .pb.cc files
# from bazel-bin (protobuf, yaml-cpp, RE2 and OpenSSL come from pkg-config).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(http_request http_response dns_query tls_sni channel_hello
  egress_frames policy_rule kit_descriptor oci_manifest api_json)

cxx=""
for c in clang++-16 clang++-15 clang++-14 clang++; do
  if command -v "$c" >/dev/null; then cxx=$c; break; fi
done
if [ -z "$cxx" ]; then
  echo "fuzz.sh: no clang++; install it with: apt-get install clang libclang-rt-14-dev" >&2
  exit 2
fi

# What each target links besides its own file ($gen is bazel-bin, for the
# generated protobuf code), the libraries it needs beyond Abseil, and the
# proto targets whose code it compiles.
sources_of() {
  case "$1" in
    http_request|http_response) echo proxyd/http.cc ;;
    dns_query|tls_sni) echo proxyd/http.cc proxyd/wire.cc ;;
    channel_hello) echo common/channel_hello.cc ;;
    egress_frames) echo common/egress_mux.cc "$gen/protos/agent/v1/agent.pb.cc" ;;
    policy_rule)
      echo common/policy/rules.cc common/policy/rule_wire.cc "$gen/protos/policy/v1/policy.pb.cc" ;;
    kit_descriptor)
      echo common/kit/{capabilities,compose,descriptor,document,effective,problems}.cc \
        common/kit/{references,relations,surface}.cc common/kit/internal/fields.cc ;;
    oci_manifest) echo vmmd/store/oci.cc ;;
    api_json) echo apid/wire_json.cc apid/api_error.cc "$gen/protos/api/v1/wire.pb.cc" ;;
    *) echo "fuzz.sh: unknown target $1" >&2; return 1 ;;
  esac
}
libs_of() {
  case "$1" in
    policy_rule|api_json|egress_frames) pkg-config --libs protobuf ;;
    kit_descriptor) pkg-config --libs yaml-cpp re2 libcrypto ;;
    oci_manifest) pkg-config --libs libcrypto ;;
  esac
}
protos_of() {
  case "$1" in
    policy_rule) echo //protos:policy_cc_grpc ;;
    api_json) echo //protos:api_wire_cc ;;
    egress_frames) echo //protos:agent_cc_grpc ;;
  esac
}

out=$(mktemp -d /tmp/airlock-fuzz.XXXXXX)
trap 'rm -rf "$out"' EXIT
# Generated code already in bazel-bin and newer than its .proto is used as
# it is (no Bazel command, which would wait for a running build or test).
gen=$(readlink -f bazel-bin 2>/dev/null || true)
protos=()
fresh=1
for t in "${targets[@]}"; do
  sources_of "$t" >/dev/null || exit 2
  protos+=($(protos_of "$t"))
  for f in $(sources_of "$t"); do
    case "$f" in
      *.pb.cc) proto=${f#"$gen"/}; [ -n "$gen" ] && [ "$f" -nt "${proto%.pb.cc}.proto" ] || fresh=0 ;;
    esac
  done
done
if [ ${#protos[@]} -gt 0 ] && [ "$fresh" -eq 0 ]; then
  if ! bazel build "${protos[@]}" > "$out/protos.log" 2>&1; then
    echo "fuzz.sh: bazel build ${protos[*]} failed:" >&2
    tail -20 "$out/protos.log" >&2
    exit 2
  fi
  gen=$(bazel info bazel-bin 2>/dev/null)
fi
absl=$(pkg-config --libs absl_statusor absl_strings absl_str_format absl_status)
crashed=0
printf '%-15s %12s %10s %8s %8s %8s\n' target execs execs/s cov ft crashes
for t in "${targets[@]}"; do
  srcs=$(sources_of "$t")
  libs=$(libs_of "$t")
  if ! "$cxx" -std=c++17 -O1 -g -I. ${gen:+-I"$gen"} -fsanitize=fuzzer,address,undefined \
      -fno-sanitize-recover=undefined "fuzz/${t}_fuzz.cc" $srcs $absl $libs -o "$out/$t" \
      2> "$out/$t.build"; then
    echo "fuzz.sh: $t does not build with $cxx:" >&2
    tail -20 "$out/$t.build" >&2
    exit 2
  fi
  mkdir -p "$out/$t.corpus" "fuzz/regressions/$t"
  cp "fuzz/corpus/$t"/* "$out/$t.corpus/"
  before=$(ls "fuzz/regressions/$t" | wc -l)
  set +e
  "$out/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="fuzz/regressions/$t/" "$out/$t.corpus" > "$out/$t.log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$out/$t.log" | tail -1)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || echo 0)
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || echo 0)
  found=$(( $(ls "fuzz/regressions/$t" | wc -l) - before ))
  printf '%-15s %12s %10s %8s %8s %8s\n' "$t" "${execs:-0}" "${rate:-0}" "${cov:-0}" "${ft:-0}" "$found"
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    crashed=1
    echo "  $t stopped ($rc); its report:" >&2
    grep -E 'ERROR|SUMMARY|property failed|artifact' "$out/$t.log" | head -8 | sed 's/^/  /' >&2
  fi
done
exit "$crashed"
