#!/bin/bash
# Builds the guest images vmmd boots, into Airlock's image cache:
#
#   kernel     Debian's linux-image-<flavour>-amd64, downloaded with apt and
#              extracted (never installed on the host), plus an uncompressed
#              vmlinux for a faster PVH boot and a modules.dep.
#   template   the base template: a Debian rootfs (bash, coreutils, curl, git,
#              ca-certificates, sudo, user `agent` uid 1000) stored as an OCI
#              image layout, and the raw ext4 disk made from that layout.
#   initramfs  the guest agent (PID 1), its shared libraries and loader,
#              busybox, and the kernel modules the guest needs.
#
# usage: build_images.sh [kernel|template|initramfs|all] (default all)
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

build_template() {
  local out=$CACHE/templates/base
  if [ -f "$out/.done" ]; then return; fi
  [ "$(id -u)" -eq 0 ] || { log "building the base template needs root (debootstrap)"; exit 1; }
  rm -rf "$out" "$out.tmp"; mkdir -p "$out.tmp"
  local rootfs=$out.tmp/rootfs
  log "debootstrap $SUITE (minbase) into $rootfs"
  debootstrap --variant=minbase \
    --include=bash,coreutils,curl,git,ca-certificates,sudo,procps,iproute2,less,openssh-client \
    "$SUITE" "$rootfs" http://deb.debian.org/debian >"$out.tmp/debootstrap.log" 2>&1 ||
    { tail -20 "$out.tmp/debootstrap.log" >&2; exit 1; }
  chroot "$rootfs" /usr/sbin/groupadd -g 1000 agent
  chroot "$rootfs" /usr/sbin/useradd -m -u 1000 -g 1000 -s /bin/bash -d /home/agent agent
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
  log "writing OCI layout"
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
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"base"}}]}' \
    "$manifest" "$manifest_size" > "$layout/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  rm -rf "$rootfs"

  # The disk is made from the layout, not from the debootstrap tree, so any
  # single-layer OCI template becomes a disk the same way.
  log "making the ext4 disk from the OCI layout"
  local unpack=$out.tmp/unpack; mkdir -p "$unpack"
  tar --numeric-owner --xattrs -xzf "$blobs/$layer" -C "$unpack"
  # A sparse 8 GiB filesystem: the raw file only holds written blocks, and
  # each sandbox's qcow2 overlay only holds what the sandbox changed.
  mkfs.ext4 -q -F -L airlock-root -E lazy_itable_init=1,lazy_journal_init=1 \
    -d "$unpack" "$out.tmp/disk.raw" 8G
  rm -rf "$unpack"
  chmod 0444 "$out.tmp/disk.raw"
  echo "sha256:$manifest" > "$out.tmp/digest"
  touch "$out.tmp/.done"
  mv "$out.tmp" "$out"
  log "template base ready: $(du -sh "$out/disk.raw" | cut -f1) on disk"
}

build_initramfs() {
  local out=$CACHE/initramfs
  [ -x "$AGENT_BIN" ] || { log "no agent binary at $AGENT_BIN (bazel build //guest:airlock-agent)"; exit 1; }
  local stamp; stamp=$(cat "$AGENT_BIN" /bin/busybox /usr/sbin/nft "$CACHE/kernel/release" \
    "$top/guest/net-setup.sh" "$top/guest/egress.nft" | sha256sum | cut -d' ' -f1)
  if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then return; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  local st=$out.tmp/root
  mkdir -p "$st"/{bin,sbin,dev,proc,sys,tmp,run,sysroot,lib/modules}
  cp /bin/busybox "$st/bin/busybox"
  for a in sh ls cat mount umount ps kill dmesg; do ln -s busybox "$st/bin/$a"; done
  cp "$AGENT_BIN" "$st/init"
  # Egress set-up (guest/egress.nft): nft and the ruleset, run before switch root.
  mkdir -p "$st/etc/airlock"
  cp /usr/sbin/nft "$st/sbin/nft"
  cp "$top/guest/net-setup.sh" "$st/etc/airlock/net-setup.sh"
  cp "$top/guest/egress.nft" "$st/etc/airlock/egress.nft"
  # The agent's and nft's shared libraries and the loader, at the paths ldd reports.
  { ldd "$AGENT_BIN"; ldd /usr/sbin/nft; } | grep -o '/[^ ]*' | sort -u | while read -r lib; do
    mkdir -p "$st$(dirname "$lib")"; cp -L "$lib" "$st$lib"
  done
  # Kernel modules the guest needs, in dependency order (built-ins skipped).
  local kdir=$CACHE/kernel/modules
  python3 - "$kdir" "$st/lib/modules" virtio_mmio virtio_blk virtio_console ext4 \
    9pnet_virtio 9p fuse virtiofs overlay \
    dummy nf_tables nft_chain_nat nft_redir nf_nat nft_reject_ipv4 nft_reject_ipv6 <<'PY'
import os, shutil, sys
mdir, dst, want = sys.argv[1], sys.argv[2], sys.argv[3:]
deps = {}
for line in open(os.path.join(mdir, 'modules.dep')):
    k, v = line.split(':', 1)
    deps[k] = v.split()
byname = {os.path.basename(k).split('.ko')[0].replace('-', '_'): k for k in deps}
order, seen = [], set()
def visit(p):
    if p in seen:
        return
    seen.add(p)
    for d in deps.get(p, []):
        visit(d)
    order.append(p)
for w in want:
    if w in byname:
        visit(byname[w])
with open(os.path.join(dst, 'load-order'), 'w') as f:
    for p in order:
        name = os.path.basename(p)
        src = os.path.join(mdir, p)
        if name.endswith('.xz') or name.endswith('.zst'):
            sys.exit('compressed modules are not supported: ' + name)
        shutil.copy(src, os.path.join(dst, name))
        f.write(name + '\n')
PY
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
  initramfs) build_initramfs ;;
  all) build_kernel; build_template; build_initramfs ;;
  *) echo "usage: $0 [kernel|template|initramfs|all]" >&2; exit 2 ;;
esac
