#!/bin/bash
# Installs every Debian 12 package that Airlock's build and runtime need
# (with --tests, also what the test suites need; with --bench, what the
# benchmarks compare against: squid, nginx, wrk). Idempotent and non-interactive: packages already present are skipped,
# so a second run does no network I/O at all.
set -euo pipefail

PACKAGES=(
  # Build: Bazel from Debian, the compiler, and the system libraries the
  # workspace links against (see third_party/BUILD.bazel).
  bazel-bootstrap bazel-rules-java g++ pkg-config python3
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libgit2-dev libssl-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libboost-dev libboost-context1.74-dev
  # Runtime: the hypervisor, disk tools and what builds the guest images.
  zlib1g-dev libyaml-cpp-dev libre2-dev libarchive-dev libcurl4-openssl-dev qemu-system-x86 qemu-utils busybox-static e2fsprogs debootstrap cpio nftables
  zstd xz-utils kmod ca-certificates openssl lz4
  # Tests and benchmarks: real git, a real HTTP client, sqlite3 shell.
  git curl sqlite3 iproute2 procps
)
# Only with --tests (tools/test.sh): the images suite's real OCI registry,
# skopeo, umoci, htpasswd, and what its token service signs with.
tests=0
bench=0
for a in "$@"; do
  case "$a" in
    --tests) tests=1 ;;
    --bench) bench=1 ;;
    -h|--help)
      echo "usage: $0 [--tests] [--bench]   (either, both or neither, in any order)"
      exit 0 ;;
    *)
      echo "airlock setup: unknown option $a (usage: $0 [--tests] [--bench])" >&2
      exit 2 ;;
  esac
done
if [ "$tests" -eq 1 ]; then
  PACKAGES+=(docker-registry skopeo umoci apache2-utils python3-jwt python3-cryptography)
fi
# Only with --bench: the reference tools the benchmarks run beside Airlock
# (each bench starts its own instance on loopback).
if [ "$bench" -eq 1 ]; then
  PACKAGES+=(squid-openssl nginx-light wrk)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "airlock setup: missing Debian packages: ${missing[*]}" >&2
  echo "airlock setup: run as root (or: sudo $0) to install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "airlock setup: installing ${missing[*]}" >&2
apt-get -o DPkg::Lock::Timeout=900 -q update >/dev/null
# Packages that ship a service (nginx, squid, the registry) must not start
# one: the tests and benchmarks start their own on loopback.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
  trap '[ "$own_policy" -eq 0 ] || rm -f "$policy"' EXIT
fi
apt-get -o DPkg::Lock::Timeout=900 -q install -y --no-install-recommends "${missing[@]}" >/dev/null
# The tests start registries of their own; Debian's package would leave one
# listening on :5000 as a system service.
if [[ " ${missing[*]} " == *" docker-registry "* ]] && command -v systemctl >/dev/null &&
  systemctl is-system-running >/dev/null 2>&1; then
  systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
