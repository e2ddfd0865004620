#!/bin/sh
# Run by the agent in the initramfs (before switch root): loopback, a dummy
# interface holding the default route (so connect() reaches the redirect
# instead of failing with "network unreachable"), and the egress ruleset.
set -e
bb=/bin/busybox
$bb ip link set lo up
$bb ip link add egress0 type dummy
$bb ip link del dummy0 2>/dev/null || true  # the module's own, unused
$bb ip addr add 10.0.2.15/24 dev egress0
$bb ip link set egress0 up
$bb ip route add default dev egress0
/sbin/nft -f /etc/airlock/egress.nft
