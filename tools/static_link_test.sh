#!/bin/bash
# static_link_test.sh BINARY...: each binary needs no shared library but the
# C library's (libc, libm, the loader). The CLI and the guest agent link
# gRPC, protobuf, Abseil and the C++ runtime statically
# (//third_party:grpc_static*); a dependency whose flags name a shared copy
# of one of them (-lgrpc++, -lprotobuf, -lssl) would put a second copy in
# the process, which fails only when it runs, if at all.
set -uo pipefail
status=0
for bin in "$@"; do
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if [ -z "$needed" ]; then
    echo "FAIL $bin: readelf found no NEEDED entries (not a dynamic binary?)"
    status=1
    continue
  fi
  ok=1
  for lib in $needed; do
    case "$lib" in
      libc.so.*|libm.so.*|ld-linux-x86-64.so.*) ;;
      *) echo "FAIL $bin needs $lib: link it statically or drop the dependency that names it"
         ok=0 status=1 ;;
    esac
  done
  [ $ok -eq 1 ] && echo "ok $bin: $(echo $needed | tr '\n' ' ')"
done
exit $status
