#!/bin/bash
# Builds the guest images vmmd boots, into Airlock's image cache:
#
#   kernel     Debian's linux-image-<flavour>-amd64, downloaded with apt and
#              extracted (never installed on the host), plus an uncompressed
#              vmlinux for a faster PVH boot and a modules.dep.
#   template   the base template: a Debian 12 rootfs (bash, coreutils, curl,
#              git, ca-certificates, sudo, user `agent` uid 1000) stored as
#              an OCI image layout.
#   docker     the docker template (`airlock create --docker`): Debian
#              unstable with the base packages and Debian's docker.io,
#              containerd, runc, docker-compose and iptables.
#   agent      the agent template (Debian unstable: Node.js, npm, python3,
#              git, curl, ripgrep, build-essential, and the docker set) the
#              built-in agents are installed into, as an OCI image layout.
#   initramfs  the guest agent (PID 1), its shared libraries and loader,
#              busybox, and the kernel modules the guest needs.
#
# usage: build_images.sh [kernel|template|docker|agent|initramfs|templates|all]
#   (default all; `templates` is every step but the initramfs, the only one
#   that needs the agent built, so it can run while Bazel builds)
# Each step is skipped when its output is already there; delete the step's
# directory under the cache to rebuild it. Needs root for debootstrap.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
CACHE=${AIRLOCK_IMAGE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock/images}
FLAVOUR=${AIRLOCK_KERNEL_FLAVOUR:-cloud-amd64}
SUITE=bookworm
AGENT_BIN=${AIRLOCK_AGENT_BIN:-$top/bazel-bin/guest/airlock-agent}
# Fixed timestamp so the template's layer is byte-for-byte reproducible for
# the same package set.
EPOCH=1700000000

log() { echo "build_images: $*" >&2; }
mkdir -p "$CACHE"

build_kernel() {
  local out=$CACHE/kernel
  if [ -f "$out/.done" ]; then return; fi
  rm -rf "$out" "$out.tmp"; mkdir -p "$out.tmp/debs"
  local pkg
  pkg=$(apt-cache depends "linux-image-$FLAVOUR" | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$pkg" ] || { log "cannot resolve linux-image-$FLAVOUR with apt-cache; run apt-get update"; exit 1; }
  log "downloading $pkg"
  (cd "$out.tmp/debs" && apt-get download -q "$pkg" >/dev/null)
  dpkg-deb -x "$out.tmp"/debs/*.deb "$out.tmp/root"
  local kver
  kver=$(ls "$out.tmp/root/lib/modules")
  depmod -b "$out.tmp/root" "$kver"
  cp "$out.tmp/root/boot/vmlinuz-$kver" "$out.tmp/vmlinuz"
  # The bzImage's payload is LZ4 (cloud) or XZ (generic); an ELF vmlinux
  # boots through PVH and skips the decompressor (about 0.25 s under TCG).
  python3 - "$out.tmp/vmlinuz" "$out.tmp/vmlinux" <<'PY' || log "no vmlinux extracted; booting the bzImage"
import lzma, subprocess, sys
data = open(sys.argv[1], 'rb').read()
out = None
i = data.find(b'\x02\x21\x4c\x18')
if i >= 0:
    p = subprocess.run(['lz4', '-dc'], input=data[i:], capture_output=True)
    out = p.stdout
else:
    i = data.find(b'\xfd7zXZ\x00')
    if i >= 0:
        out = lzma.LZMADecompressor().decompress(data[i:])
if not out or out[:4] != b'\x7fELF':
    sys.exit(1)
open(sys.argv[2], 'wb').write(out)
PY
  mv "$out.tmp/root/lib/modules/$kver" "$out.tmp/modules"
  rm -rf "$out.tmp/root" "$out.tmp/debs"
  echo "$kver" > "$out.tmp/release"
  touch "$out.tmp/.done"
  mv "$out.tmp" "$out"
  log "kernel $kver ready in $out"
}

# sha256 of a file, bare hex.
digest() { sha256sum "$1" | cut -d' ' -f1; }

# build_rootfs NAME SUITE PACKAGES [EXTRA_PACKAGES]: a Debian rootfs made
# by debootstrap (minbase, PACKAGES) plus EXTRA_PACKAGES installed by apt
# inside it (apt resolves what debootstrap cannot), user `agent` (uid
# 1000, passwordless sudo, ~/workspace), stored as a one-layer OCI image
# layout in templates/NAME/oci. vmmd imports it as NAME:latest and makes
# the boot disk itself.
build_rootfs() {
  local name=$1 suite=$2 packages=$3 extra=${4:-}
  local out=$CACHE/templates/$name
  if [ -f "$out/.done" ]; then return; fi
  [ "$(id -u)" -eq 0 ] || { log "building the $name template needs root (debootstrap)"; exit 1; }
  umount "$out.tmp/rootfs/proc" 2>/dev/null || true
  rm -rf --one-file-system "$out" "$out.tmp"; mkdir -p "$out.tmp"
  local rootfs=$out.tmp/rootfs
  log "debootstrap $suite (minbase) into $rootfs"
  debootstrap --variant=minbase --include="$packages" \
    "$suite" "$rootfs" http://deb.debian.org/debian >"$out.tmp/debootstrap.log" 2>&1 ||
    { tail -20 "$out.tmp/debootstrap.log" >&2; exit 1; }
  if [ -n "$extra" ]; then
    log "apt-get install in the $name rootfs: $extra"
    mount -t proc proc "$rootfs/proc"
    # Never leave proc mounted in the tree the next run deletes.
    trap 'umount "'"$rootfs"'/proc" 2>/dev/null || true' EXIT
    # Packages' maintainer scripts must not start daemons (dockerd) on the
    # build host: policy-rc.d says no to every invoke-rc.d.
    printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"
    chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
    local rc=0
    chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends $extra >>"$out.tmp/debootstrap.log" 2>&1 || rc=$?
    rm -f "$rootfs/usr/sbin/policy-rc.d"
    umount "$rootfs/proc"; trap - EXIT
    [ "$rc" -eq 0 ] || { tail -20 "$out.tmp/debootstrap.log" >&2; exit 1; }
  fi
  chroot "$rootfs" /usr/sbin/groupadd -g 1000 agent
  chroot "$rootfs" /usr/sbin/useradd -m -u 1000 -g 1000 -s /bin/bash -d /home/agent agent
  # With Docker in the template, the agent user reaches dockerd's socket.
  if [ -x "$rootfs/usr/sbin/dockerd" ]; then
    chroot "$rootfs" /usr/sbin/groupadd -f docker
    chroot "$rootfs" /usr/sbin/usermod -aG docker agent
  fi
  echo 'agent ALL=(ALL) NOPASSWD:ALL' > "$rootfs/etc/sudoers.d/agent"
  chmod 0440 "$rootfs/etc/sudoers.d/agent"
  mkdir -p "$rootfs/home/agent/workspace"
  chroot "$rootfs" chown -R agent:agent /home/agent
  echo sandbox > "$rootfs/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n' > "$rootfs/etc/hosts"
  # Host-specific or volatile content does not belong in a template.
  rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* \
    "$rootfs"/debootstrap "$rootfs"/etc/machine-id "$rootfs"/var/lib/dbus/machine-id
  : > "$rootfs/etc/machine-id"

  # OCI image layout: one gzip layer, a config and a manifest, named by
  # their sha256 digests.
  local layout=$out.tmp/oci blobs
  blobs=$layout/blobs/sha256; mkdir -p "$blobs"
  log "writing the $name OCI layout"
  tar --sort=name --numeric-owner --mtime="@$EPOCH" --xattrs -C "$rootfs" -cf "$out.tmp/layer.tar" .
  local diff_id; diff_id=$(digest "$out.tmp/layer.tar")
  gzip -n -1 "$out.tmp/layer.tar"
  local layer; layer=$(digest "$out.tmp/layer.tar.gz")
  local layer_size; layer_size=$(stat -c %s "$out.tmp/layer.tar.gz")
  mv "$out.tmp/layer.tar.gz" "$blobs/$layer"
  printf '{"architecture":"amd64","os":"linux","config":{"User":"agent","WorkingDir":"/home/agent/workspace","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HOME=/home/agent"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$diff_id" > "$out.tmp/config.json"
  local config; config=$(digest "$out.tmp/config.json")
  local config_size; config_size=$(stat -c %s "$out.tmp/config.json")
  mv "$out.tmp/config.json" "$blobs/$config"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
    "$config" "$config_size" "$layer" "$layer_size" > "$out.tmp/manifest.json"
  local manifest; manifest=$(digest "$out.tmp/manifest.json")
  local manifest_size; manifest_size=$(stat -c %s "$out.tmp/manifest.json")
  mv "$out.tmp/manifest.json" "$blobs/$manifest"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest" "$manifest_size" "$name" > "$layout/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  local unpacked packed
  unpacked=$(du -sh "$rootfs" | cut -f1); packed=$(du -sh "$blobs/$layer" | cut -f1)
  rm -rf "$rootfs"
  echo "sha256:$manifest" > "$out.tmp/digest"
  touch "$out.tmp/.done"
  mv "$out.tmp" "$out"
  log "template $name ready: $unpacked unpacked, $packed compressed"
}

BASE_PACKAGES=bash,coreutils,curl,git,ca-certificates,sudo,procps,iproute2,less,openssh-client

# The base template: Debian 12 with a shell, git and curl.
build_template() { build_rootfs base "$SUITE" "$BASE_PACKAGES"; }

# The agent template the built-in agents are installed into: a Node.js
# every listed agent CLI accepts (Claude Code and Qwen Code need 22 or
# later; Debian 12 has 18 and 13 has 20, so this is Debian's unstable
# suite), npm, python3, git, curl, ripgrep and build-essential.
AGENT_SUITE=${AIRLOCK_AGENT_SUITE:-sid}
# Debian's Docker Engine, its CLI with buildx, its runtime and Compose (v2, the `docker compose`
# plugin); the sysusers alternative keeps systemd itself out; a static
# busybox makes a one-file base image offline (`docker import`).
DOCKER_PACKAGES="docker.io docker-cli docker-buildx containerd runc docker-compose iptables systemd-standalone-sysusers busybox-static"
build_docker_template() { build_rootfs docker "$AGENT_SUITE" "$BASE_PACKAGES" "$DOCKER_PACKAGES"; }
build_agent_template() {
  build_rootfs agent "$AGENT_SUITE" "$BASE_PACKAGES" \
    "nodejs npm python3 ripgrep build-essential $DOCKER_PACKAGES"
}

# write_modules MODULES_DIR DEST LIST NAME...: copies the named modules and
# what they depend on (first) into DEST, already loaded ones (listed in an
# earlier list of DEST) skipped, and writes their order to DEST/LIST. With
# AFTER set (a space-separated list of lists, possibly empty), only those
# count as loaded before: a list loaded at the same time as another must
# not count on it.
write_modules() {
  AFTER=${AFTER-all} python3 - "$@" <<'PY'
import os, shutil, subprocess, sys
mdir, dst, listname, want = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
after = os.environ['AFTER']
deps = {}
for line in open(os.path.join(mdir, 'modules.dep')):
    k, v = line.split(':', 1)
    deps[k] = v.split()
byname = {os.path.basename(k).split('.ko')[0].replace('-', '_'): k for k in deps}
seen = set()
for other in os.listdir(dst):
    if other.startswith('load-order') and (after == 'all' or other in after.split()):
        seen.update(l.strip() for l in open(os.path.join(dst, other)))
seen = {k for k in deps if os.path.basename(k) in seen}
order = []
def visit(p):
    if p in seen:
        return
    seen.add(p)
    for d in deps.get(p, []):
        visit(d)
    order.append(p)
for w in want:
    if w not in byname:  # built into the kernel
        continue
    visit(byname[w])
with open(os.path.join(dst, listname), 'w') as f:
    for p in order:
        name = os.path.basename(p)
        if name.endswith('.xz') or name.endswith('.zst'):
            sys.exit('compressed modules are not supported: ' + name)
        # Without the appended signature: this kernel does not enforce
        # signatures (no module.sig_enforce, no lockdown), so checking one
        # (a hash of the module and an RSA verify, ~5 ms a module under
        # TCG) changes nothing but the taint flag.
        subprocess.run(['strip', '--strip-debug', '-o', os.path.join(dst, name),
                        os.path.join(mdir, p)], check=True)
        f.write(name + '\n')
PY
}

build_initramfs() {
  local out=$CACHE/initramfs
  [ -x "$AGENT_BIN" ] || { log "no agent binary at $AGENT_BIN (bazel build //guest:airlock-agent)"; exit 1; }
  local stamp; stamp=$(cat "$AGENT_BIN" /bin/busybox /usr/sbin/nft "$CACHE/kernel/release" \
    "$top/guest/egress.nft" "$here/build_images.sh" | sha256sum | cut -d' ' -f1)
  if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  local st=$out.tmp/root
  mkdir -p "$st"/{bin,sbin,dev,proc,sys,tmp,run,sysroot,lib/modules}
  cp /bin/busybox "$st/bin/busybox"
  for a in sh ls cat mount umount ps kill dmesg; do ln -s busybox "$st/bin/$a"; done
  # Stripped: the symbol table is a third of the binary, and every byte of
  # the initramfs is unpacked by the guest kernel at each boot.
  strip -o "$st/init" "$AGENT_BIN"
  # Egress set-up (guest/egress.nft): nft and the ruleset, run before switch root.
  mkdir -p "$st/etc/airlock"
  cp /usr/sbin/nft "$st/sbin/nft"
  cp "$top/guest/egress.nft" "$st/etc/airlock/egress.nft"
  # The agent's and nft's shared libraries and the loader, at the paths ldd reports.
  { ldd "$AGENT_BIN"; ldd /usr/sbin/nft; } | grep -o '/[^ ]*' | sort -u | while read -r lib; do
    mkdir -p "$st$(dirname "$lib")"; cp -L "$lib" "$st$lib"
  done
  # Kernel modules, in dependency order (built-ins skipped), each list
  # leaving out what an earlier one loads (guest/boot.h): load-order
  # before the root disk and the ports (virtio_pci: the ports' device, and
  # shares plugged into a restored VM), load-order-net for the egress
  # interface and ruleset (the agent loads both at once), load-order-late
  # after the agent answers (virtiofs, overlayfs), load-order-docker what a
  # Docker Engine needs on top (airlock.docker=1): bridges and veth pairs,
  # and the netfilter parts of its iptables (nft backend) rules. No br_netfilter:
  # containers on one bridge talk over it without passing the egress rules.
  local kdir=$CACHE/kernel/modules
  write_modules "$kdir" "$st/lib/modules" load-order virtio_mmio virtio_pci virtio_blk \
    virtio_console virtio_balloon ext4
  # Loaded beside load-order: it repeats what it shares with it (a second
  # load of a module is harmless), never counts on it.
  AFTER="" write_modules "$kdir" "$st/lib/modules" load-order-net dummy nf_tables nft_chain_nat nft_redir \
    nf_nat nft_reject_ipv4 nft_reject_ipv6 nft_fib_ipv4 nft_fib_ipv6
  write_modules "$kdir" "$st/lib/modules" load-order-late fuse virtiofs overlay
  write_modules "$kdir" "$st/lib/modules" load-order-docker bridge veth nf_conntrack nf_nat \
    nft_compat nft_ct nft_nat nft_masq xt_addrtype xt_conntrack xt_MASQUERADE xt_nat \
    xt_tcpudp xt_comment xt_mark xt_multiport ipt_REJECT ip6t_REJECT nf_conntrack_netlink
  mknod -m 600 "$st/dev/console" c 5 1
  mknod -m 666 "$st/dev/null" c 1 3
  (cd "$st" && find . -print0 | LC_ALL=C sort -z |
    cpio --null --quiet -o -H newc --reproducible) > "$out.tmp/initramfs.cpio"
  rm -rf "$st"
  echo "$stamp" > "$out.tmp/stamp"
  rm -rf "$out"; mv "$out.tmp" "$out"
  log "initramfs ready: $(du -sh "$out/initramfs.cpio" | cut -f1)"
}

case "${1:-all}" in
  kernel) build_kernel ;;
  template) build_template ;;
  docker) build_docker_template ;;
  agent) build_agent_template ;;
  initramfs) build_initramfs ;;
  templates) build_kernel; build_template; build_docker_template; build_agent_template ;;
  all) build_kernel; build_template; build_docker_template; build_agent_template; build_initramfs ;;
  *) echo "usage: $0 [kernel|template|docker|agent|initramfs|templates|all]" >&2; exit 2 ;;
esac
