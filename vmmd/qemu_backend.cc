#include "vmmd/qemu_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/klog.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/console_markers.h"
#include "common/fd_io.h"
#include "common/subprocess.h"
#include "vmmd/memory_image.h"
#include "vmmd/qmp.h"

namespace airlock::vmmd {
namespace {

// MhzAfter parses the number after `key` in `text` as MHz and returns kHz.
uint64_t MhzAfter(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  std::string rest = text.substr(at + key.size());
  size_t end = rest.find_first_not_of("0123456789.");
  double mhz = 0;
  if (!absl::SimpleAtod(rest.substr(0, end), &mhz)) return 0;
  return static_cast<uint64_t>(std::llround(mhz * 1000));
}

uint32_t BigEndian(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> QcowBackingChain(const std::string& path) {
  std::vector<std::string> chain;
  std::string at = path;
  for (int depth = 0; depth < 16; ++depth) {
    int fd = open(at.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", at, ": ", strerror(errno)));
    unsigned char h[20];
    ssize_t n = pread(fd, h, sizeof(h), 0);
    if (n != sizeof(h) || memcmp(h, "QFI\xfb", 4) != 0) {
      close(fd);
      return chain;  // raw (or not qcow2): the end of the chain
    }
    uint64_t offset = (static_cast<uint64_t>(BigEndian(h + 8, 4)) << 32) | BigEndian(h + 12, 4);
    uint32_t size = BigEndian(h + 16, 4);
    if (offset == 0 || size == 0) {
      close(fd);
      return chain;
    }
    if (size > 1023) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(at, ": backing file name too long"));
    }
    std::string name(size, '\0');
    ssize_t got = pread(fd, name.data(), size, static_cast<off_t>(offset));
    close(fd);
    if (got != static_cast<ssize_t>(size)) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": truncated qcow2 header"));
    }
    if (name[0] != '/') name = at.substr(0, at.rfind('/') + 1) + name;
    chain.push_back(name);
    at = name;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": backing chain deeper than 16"));
}

std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

namespace {

// VmJail is what every QEMU's jail (a sandbox's, the probe's) holds: its
// ids, /usr, the kernel and initramfs, and the harmless devices, with
// /dev/kvm of its own under KVM.
JailSpec VmJail(const std::string& root, const std::string& hostname, uint32_t uid,
                const std::string& kernel, const std::string& initrd, bool kvm) {
  JailSpec spec;
  spec.root = root;
  spec.hostname = hostname;
  if (geteuid() == 0) {
    spec.uid = uid;
    spec.gid = uid;
  } else {
    // An ordinary user's QEMU keeps that user's ids (and its kvm group).
    spec.uid = geteuid();
    spec.gid = getegid();
    spec.uid_map = {{spec.uid, spec.uid, 1}};
    spec.gid_map = {{spec.gid, spec.gid, 1}};
  }
  spec.mounts = SystemMounts();
  // The kernel and initramfs at fixed places: nothing of the image
  // directory's own path (often under a home) shows inside.
  spec.mounts.push_back({kernel, true, kJailKernel});
  spec.mounts.push_back({initrd, true, kJailInitrd});
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}) {
    spec.devices.push_back({dev, false});
  }
  if (kvm) spec.devices.push_back({"/dev/kvm", true});
  return spec;
}

}  // namespace

absl::StatusOr<JailSpec> QemuJail(const VmConfig& c) {
  JailSpec spec = VmJail(c.jail_root, absl::StrCat("airlock-", c.name), c.jail_uid, c.kernel,
                         c.initrd, c.accelerator == "kvm");
  spec.cgroup_procs = c.cgroup_procs;
  // Under TCG huge pages buy nothing (its TLB maps 4 KiB pages), and a
  // restored guest's memory, written page by page all over, would be
  // faulted in 2 MiB at a time: several times what the guest uses.
  spec.no_huge_pages = c.accelerator != "kvm";
  auto chain = QcowBackingChain(c.disk);
  if (!chain.ok()) return chain.status();
  for (const std::string& b : *chain) {
    char real[PATH_MAX];
    if (realpath(b.c_str(), real) == nullptr || c.backing_dir.empty() ||
        !absl::StartsWith(real, c.backing_dir + "/")) {
      return absl::FailedPreconditionError(absl::StrCat(
          c.disk, " names the backing file ", b, ", which is not in the image store (",
          c.backing_dir, "): the disk was altered; remove the sandbox (`airlock rm -f ", c.name,
          "`)"));
    }
    spec.mounts.push_back({real, true});
  }
  spec.mounts.push_back({c.disk, false});
  if (!c.docker_disk.empty()) spec.mounts.push_back({c.docker_disk, false});
  spec.mounts.push_back({c.console_log, false});
  spec.mounts.push_back({c.socket_dir, false});
  return spec;
}
 
namespace {

uint64_t ReadHostTscKhz() {
  uint64_t khz = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(
                           ReadFileToString("/sys/devices/system/cpu/cpu0/tsc_freq_khz")),
                       &khz) &&
      khz > 0) {
    return khz;
  }
  int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
  if (size > 0) {
    std::string buf(size, '\0');
    int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf.data(), size);
    if (n > 0) {
      buf.resize(n);
      if ((khz = MhzAfter(buf, "tsc: Refined TSC clocksource calibration: ")) > 0) return khz;
      if ((khz = MhzAfter(buf, "tsc: Detected ")) > 0) return khz;
    }
  }
  std::string cpuinfo = ReadFileToString("/proc/cpuinfo");
  size_t at = cpuinfo.find("cpu MHz");
  if (at != std::string::npos) {
    size_t colon = cpuinfo.find(':', at);
    if (colon != std::string::npos) return MhzAfter(cpuinfo.substr(colon + 1), " ");
  }
  return 0;
}

}  // namespace

uint64_t HostTscKhz() {
  // Read once: the fallback (/proc/cpuinfo) follows frequency scaling, and
  // a command line that changes from boot to boot would never match a
  // snapshot's.
  static const uint64_t khz = ReadHostTscKhz();
  return khz;
}

std::string KernelCmdline(const std::string& name, uint64_t tsc_khz, bool probe,
                          bool ensure_agent_user, bool docker, bool aslr) {
  std::string cmdline =
      "console=ttyS0 quiet panic=-1 i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd "
      "i8042.nokbd tsc=reliable no_timer_check cryptomgr.notests edd=off "
      "random.trust_cpu=on rcupdate.rcu_expedited=1"
      // The PCIe root ports' hot-plug (a restored VM's shares): microvm's
      // firmware tables leave PCIe services to the OS only this way.
      " pcie_ports=native"
      // Debian turns on zeroing of every kernel allocation (a hardening
      // between the guest's own processes); under TCG it is ~0.3 s of a
      // boot. The host hands the guest zeroed memory, and the VM, not the
      // guest kernel, is the boundary that keeps a sandbox in.
      " init_on_alloc=0"
      // Built-in start-up work of Debian's kernel that a sandbox has no use
      // for (under TCG ~0.2 s of a boot, measured by initcall_debug): the
      // KDF's self-test, key types, keyrings and the integrity subsystem's
      // (IMA, EVM, TPM; the initramfs's modules are stripped of their
      // signatures, so no key checks them), thermal zones, a VGA arbiter
      // and NVMe's core (microvm has none of those devices, nor ACPI CPU
      // objects whose cooling devices would need the thermal class: the
      // list is for microvm), kprobe events, and tracefs's files: ~10,000
      // inodes and dentries, 8 MiB of every guest's memory and snapshot
      // that nothing frees. The kernel matches names, not places: a name
      // two initcalls share is not listed (BLAKE2s's self-test shares
      // blake2s_mod_init with the x86 code that picks its fast versions).
      " initcall_blacklist=crypto_kdf108_init,init_encrypted,"
      "load_system_certificate_list,digsig_init,init_ima,init_evm,tpm_init,thermal_init,"
      "acpi_thermal_init,vga_arb_device_init,nvme_core_init,init_kprobe_trace,"
      "tracer_init_tracefs";
  if (tsc_khz > 0) {
    // lpj is loops per jiffy at HZ=250: kHz * 1000 / 250.
    absl::StrAppend(&cmdline, " tsc_early_khz=", tsc_khz, " lpj=", tsc_khz * 4);
  }
  absl::StrAppend(&cmdline, " airlock.hostname=", name);
  if (probe) absl::StrAppend(&cmdline, " airlock.probe=1");
  if (ensure_agent_user) absl::StrAppend(&cmdline, " airlock.agent_user=1");
  if (docker) absl::StrAppend(&cmdline, " airlock.docker=1");
  if (!aslr) absl::StrAppend(&cmdline, " airlock.aslr=0");
  return cmdline;
}

namespace {

// The machine: microvm with its PCIe host bridge, where the hot-plug slots
// are (virtio-mmio devices cannot be added to a running microvm).
constexpr char kMachine[] = "microvm,pcie=on";

std::string HotplugBus(size_t slot) { return absl::StrCat("hotplug", slot); }

}  // namespace

std::vector<std::string> QemuBackend::Args(const VmConfig& c) const {
  bool kvm = c.accelerator == "kvm";
  std::vector<std::string> args = {
      qemu_,
      "-name", absl::StrCat("airlock-", c.name),
      "-M", kMachine,
      // TCG's translation cache is bounded (QEMU's default is 1 GiB), so the
      // VM's memory is its guest size plus a known overhead.
      "-accel", kvm ? "kvm" : absl::StrCat("tcg,tb-size=", c.tcg_cache_mib),
      "-cpu", kvm ? "host" : "max",
      "-smp", absl::StrCat(c.cpus),
      "-m", absl::StrCat(c.memory_mib, "M"),
      "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
      // QEMU's own seccomp filter: no new processes, no privilege changes.
      "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-global", "virtio-mmio.force-legacy=false",
      "-chardev", absl::StrCat("file,id=console,path=", c.console_log),
      "-serial", "chardev:console",
      "-kernel", c.kernel,
      "-initrd", c.initrd,
      "-append", KernelCmdline(c.hostname.empty() ? c.name : c.hostname, kvm ? 0 : HostTscKhz(),
                              false, c.ensure_agent_user, !c.docker_disk.empty(),
                              GuestAslr(c.guest_aslr, c.accelerator)),
      "-drive", absl::StrCat("file=", c.disk, ",format=qcow2,if=none,id=root,discard=unmap"),
      "-device", "virtio-blk-device,drive=root",
      "-chardev", absl::StrCat("socket,id=agent,path=", c.agent_socket, ",server=on,wait=off"),
      // The agent's and egress ports' device is on the PCIe host bridge:
      // virtio-mmio offers every queue 1024 entries, and the guest fills
      // each receive queue of a serial device with a page per entry (12 MiB
      // for its three, held by every VM and snapshot); over PCI the device
      // offers 128.
      "-device", "virtio-serial-pci,bus=pcie.0",
      "-device", "virtserialport,chardev=agent,name=airlock.agent",
      // The egress port: only proxyd opens its host end.
      "-chardev", absl::StrCat("socket,id=egress,path=", c.egress_socket, ",server=on,wait=off"),
      "-device", "virtserialport,chardev=egress,name=airlock.egress",
      // The guest hands the pages it frees back to the host (free page
      // reporting): an idle sandbox holds what it uses, not all it ever
      // touched.
      "-device", "virtio-balloon-device,free-page-reporting=on",
  };
  // Empty slots for shares plugged once the VM runs (AttachShare).
  for (size_t i = 0; i < kShareHotplugSlots; ++i) {
    args.insert(args.end(), {"-device", absl::StrCat("pcie-root-port,id=", HotplugBus(i),
                                                     ",bus=pcie.0,chassis=", i + 1)});
  }
  if (!c.qmp_socket.empty()) {
    args.insert(args.end(), {"-qmp", absl::StrCat("unix:", c.qmp_socket, ",server=on,wait=off")});
  }
  if (!c.incoming_socket.empty()) {
    args.insert(args.end(), {"-incoming", absl::StrCat("unix:", c.incoming_socket)});
  }
  if (!c.memory_image.empty()) {
    // The backend takes the name of the RAM QEMU makes for `-m`, which is
    // the block the snapshot's stream was saved with. Shared: the pages
    // the guest frees are punched out of the sandbox's own memfd.
    args.insert(args.end(), {"-object", absl::StrCat("memory-backend-file,id=microvm.ram,size=",
                                                     c.memory_mib, "M,mem-path=",
                                                     kMemoryImagePath, ",share=on")});
    for (auto& a : args) {
      if (a == kMachine) a = absl::StrCat(kMachine, ",memory-backend=microvm.ram");
    }
  }
  if (!c.docker_disk.empty()) {
    args.insert(args.end(),
                {"-drive",
                 absl::StrCat("file=", c.docker_disk, ",format=raw,if=none,id=docker,discard=unmap"),
                 "-device", absl::StrCat("virtio-blk-device,drive=docker,serial=", kDockerDiskSerial)});
  }
  if (!c.shares.empty()) {
    // vhost-user-fs needs guest memory that virtiofsd can map.
    args.insert(args.end(),
                {"-object",
                 absl::StrCat("memory-backend-memfd,id=mem,size=", c.memory_mib, "M,share=on")});
    for (auto& a : args) {
      if (a == kMachine) a = absl::StrCat(kMachine, ",memory-backend=mem");
    }
    for (size_t i = 0; i < c.shares.size(); ++i) {
      args.insert(args.end(),
                  {"-chardev", absl::StrCat("socket,id=fs", i, ",path=", c.shares[i].socket),
                   "-device",
                   absl::StrCat("vhost-user-fs-device,chardev=fs", i, ",tag=", c.shares[i].tag)});
    }
  }
  return args;
}

std::string QemuBackend::Marker(const VmConfig& c) const {
  return absl::StrCat("file=", c.disk, ",");
}

absl::StatusOr<pid_t> QemuBackend::Launch(const VmConfig& c) {
  UniqueFd image;
  if (!c.memory_image.empty()) {
    image = UniqueFd(open(c.memory_image.c_str(), O_RDONLY | O_CLOEXEC));
    if (image.get() < 0) {
      return absl::InternalError(
          absl::StrCat("cannot open the memory image ", c.memory_image, ": ", strerror(errno)));
    }
  }
  if (c.jail_uid == 0) {
    if (image.get() < 0) return SpawnDetached(Args(c), c.vmm_log);
    // Not jailed, so no cgroup to charge: vmmd makes the copy itself.
    int copy = CopyToMemfd(image.get());
    if (copy < 0) {
      return absl::InternalError(absl::StrCat("cannot copy the memory image ", c.memory_image,
                                              ": ", strerror(-copy)));
    }
    UniqueFd owned(copy);
    return SpawnDetached(Args(c), c.vmm_log, owned.get(), kMemoryImageFd);
  }
  auto spec = QemuJail(c);
  if (!spec.ok()) return spec.status();
  spec->die_with_parent = c.die_with_vmmd;
  spec->memory_image_fd = image.get();
  VmConfig inside = c;
  inside.kernel = kJailKernel;
  inside.initrd = kJailInitrd;
  std::vector<std::string> args = Args(inside);
  args[0] = FindProgram(args[0]);
  return LaunchJailed(args, *spec, c.vmm_log);
}

std::string QemuBackend::Build() const {
  std::string path = qemu_;
  if (path.find('/') == std::string::npos) {
    const char* env = getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(env != nullptr ? env : "/usr/bin:/bin", ':')) {
      std::string candidate = absl::StrCat(dir, "/", qemu_);
      if (access(candidate.c_str(), X_OK) == 0) {
        path = candidate;
        break;
      }
    }
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(path, ":", st.st_size, ":", st.st_ctime);
}

std::string QemuBackend::Describe(const VmConfig& config) const {
  std::string build = Build();
  if (build.empty()) return "";
  // The paths of the VM's own files differ between the snapshot's VM and
  // each restored one: everything else is the key.
  VmConfig c = config;
  c.disk = "DISK";
  c.console_log = "CONSOLE";
  c.vmm_log = "LOG";
  c.agent_socket = "AGENT";
  c.egress_socket = "EGRESS";
  c.qmp_socket.clear();
  c.incoming_socket.clear();
  c.memory_image.clear();
  c.kernel = "KERNEL";
  c.initrd = "INITRD";
  std::vector<std::string> args = Args(c);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "-name") args[i + 1] = "NAME";
  }
  std::string host;
  if (c.accelerator == "kvm") {
    // `-cpu host` hands the guest this host's CPU: another host (or a
    // kernel exposing other features) must not restore it.
    struct utsname u {};
    uname(&u);
    std::string cpuinfo = ReadFileToString("/proc/cpuinfo");
    size_t flags = cpuinfo.find("\nflags");
    host = absl::StrCat(u.release, "\n",
                        flags == std::string::npos
                            ? ""
                            : cpuinfo.substr(flags + 1, cpuinfo.find('\n', flags + 1) - flags - 1));
  }
  return absl::StrCat(build, "\n", absl::StrJoin(args, " "), "\n", host);
}

std::pair<std::string, std::string> QemuBackend::ProbeAccelerator(const std::string& kernel,
                                                                  const std::string& initrd,
                                                                  const std::string& work_dir) {
  int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) return {"tcg", "/dev/kvm cannot be opened; using TCG (software emulation)"};
  close(fd);
  std::string console = work_dir + "/kvm-probe.console";
  unlink(console.c_str());
  std::vector<std::string> args = {
      qemu_, "-M", "microvm", "-accel", "kvm", "-cpu", "host", "-m", "256M", "-smp", "1",
      "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
      "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-chardev", "file,id=console,path=" + console, "-serial", "chardev:console",
      "-kernel", kernel, "-initrd", initrd, "-append", KernelCmdline("probe", 0, true)};
  absl::StatusOr<pid_t> pid;
  if (probe_uid_ != 0) {
    // Jailed like a sandbox's QEMU, and a child of this thread: it dies
    // with vmmd, so a vmmd killed mid-probe leaves no QEMU behind.
    JailSpec spec = VmJail(work_dir + "/kvm-probe.root", "airlock-probe", probe_uid_, kernel,
                           initrd, /*kvm=*/true);
    spec.die_with_parent = true;
    spec.mounts.push_back({console, false});
    int cfd = open(console.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (cfd >= 0) close(cfd);
    if (mkdir(spec.root.c_str(), 0755) != 0 && errno != EEXIST) {
      return {"tcg", absl::StrCat("KVM probe could not start: mkdir ", spec.root, ": ", strerror(errno))};
    }
    if (geteuid() == 0 && chown(console.c_str(), probe_uid_, probe_uid_) != 0) {
      return {"tcg", absl::StrCat("KVM probe could not start: chown ", console, ": ", strerror(errno))};
    }
    for (auto& a : args) {
      if (a == kernel) a = kJailKernel;
      if (a == initrd) a = kJailInitrd;
    }
    args[0] = FindProgram(args[0]);
    pid = LaunchJailed(args, spec, work_dir + "/kvm-probe.log");
  } else {
    pid = SpawnDetached(args, work_dir + "/kvm-probe.log");
  }
  if (!pid.ok()) return {"tcg", absl::StrCat("KVM probe could not start: ", pid.status().message())};
  // A working KVM boots to the agent in well under a second; nested setups
  // that cannot run a stock kernel (PVM) crawl for many seconds and die.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  bool ok = false;
  while (std::chrono::steady_clock::now() < deadline && ProcessAlive(*pid)) {
    if (ReadFileToString(console).find(kProbeMarker) != std::string::npos) {
      ok = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(*pid, SIGKILL);
  if (probe_uid_ != 0) waitpid(*pid, nullptr, 0);
  if (ok) return {"kvm", "a KVM probe boot reached the guest agent"};
  return {"tcg", "/dev/kvm exists but a probe boot did not reach the guest agent within 8 s "
                 "(e.g. nested PVM, which cannot run stock kernels); using TCG"};
}

absl::Status QemuBackend::AttachShare(const VmConfig& config, size_t slot, const VmShare& share) {
  if (slot >= kShareHotplugSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("no hot-plug slot ", slot, " (a VM has ", kShareHotplugSlots, ")"));
  }
  if (config.qmp_socket.empty()) {
    return absl::FailedPreconditionError("the VM has no QMP socket to add a share through");
  }
  auto qmp = QmpClient::Connect(config.qmp_socket, std::chrono::seconds(5));
  if (!qmp.ok()) return qmp.status();
  std::string chardev = absl::StrCat("hotplugfs", slot);
  nlohmann::json backend = {
      {"type", "socket"},
      {"data",
       {{"addr", {{"type", "unix"}, {"data", {{"path", share.socket}}}}}, {"server", false}}}};
  if (auto r = qmp->Execute("chardev-add", {{"id", chardev}, {"backend", backend}}); !r.ok()) {
    return absl::Status(r.status().code(), absl::StrCat("cannot connect QEMU to the share's ",
                                                        "virtiofsd: ", r.status().message()));
  }
  auto added = qmp->Execute("device_add", {{"driver", "vhost-user-fs-pci"},
                                           {"id", absl::StrCat("hotplugfsdev", slot)},
                                           {"bus", HotplugBus(slot)},
                                           {"chardev", chardev},
                                           {"tag", share.tag}});
  if (!added.ok()) {
    return absl::Status(added.status().code(),
                        absl::StrCat("cannot add the share's device: ", added.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace airlock::vmmd
