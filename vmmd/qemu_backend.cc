#include "vmmd/qemu_backend.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/klog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "common/subprocess.h"

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

}  // namespace

uint64_t HostTscKhz() {
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

std::string KernelCmdline(const std::string& name, uint64_t tsc_khz, bool probe,
                          bool ensure_agent_user, bool docker) {
  std::string cmdline =
      "console=ttyS0 quiet panic=-1 i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd "
      "i8042.nokbd tsc=reliable no_timer_check cryptomgr.notests edd=off "
      "random.trust_cpu=on rcupdate.rcu_expedited=1";
  if (tsc_khz > 0) {
    // lpj is loops per jiffy at HZ=250: kHz * 1000 / 250.
    absl::StrAppend(&cmdline, " tsc_early_khz=", tsc_khz, " lpj=", tsc_khz * 4);
  }
  absl::StrAppend(&cmdline, " airlock.hostname=", name);
  if (probe) absl::StrAppend(&cmdline, " airlock.probe=1");
  if (ensure_agent_user) absl::StrAppend(&cmdline, " airlock.agent_user=1");
  if (docker) absl::StrAppend(&cmdline, " airlock.docker=1");
  return cmdline;
}

std::vector<std::string> QemuBackend::Args(const VmConfig& c) const {
  bool kvm = c.accelerator == "kvm";
  std::vector<std::string> args = {
      qemu_,
      "-name", absl::StrCat("airlock-", c.name),
      "-M", "microvm",
      "-accel", kvm ? "kvm" : "tcg",
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
      "-append", KernelCmdline(c.name, kvm ? 0 : HostTscKhz(), false, c.ensure_agent_user,
                              !c.docker_disk.empty()),
      "-drive", absl::StrCat("file=", c.disk, ",format=qcow2,if=none,id=root,discard=unmap"),
      "-device", "virtio-blk-device,drive=root",
      "-chardev", absl::StrCat("socket,id=agent,path=", c.agent_socket, ",server=on,wait=off"),
      "-device", "virtio-serial-device",
      "-device", "virtserialport,chardev=agent,name=airlock.agent",
      // The egress port: only proxyd opens its host end.
      "-chardev", absl::StrCat("socket,id=egress,path=", c.egress_socket, ",server=on,wait=off"),
      "-device", "virtserialport,chardev=egress,name=airlock.egress",
  };
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
      if (a == "microvm") a = "microvm,memory-backend=mem";
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
  return SpawnDetached(Args(c), c.vmm_log);
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
      "-chardev", "file,id=console,path=" + console, "-serial", "chardev:console",
      "-kernel", kernel, "-initrd", initrd, "-append", KernelCmdline("probe", 0, true)};
  auto pid = SpawnDetached(args, work_dir + "/kvm-probe.log");
  if (!pid.ok()) return {"tcg", absl::StrCat("KVM probe could not start: ", pid.status().message())};
  // A working KVM boots to the agent in well under a second; nested setups
  // that cannot run a stock kernel (PVM) crawl for many seconds and die.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  bool ok = false;
  while (std::chrono::steady_clock::now() < deadline && ProcessAlive(*pid)) {
    if (ReadFileToString(console).find("AIRLOCK-PROBE-OK") != std::string::npos) {
      ok = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(*pid, SIGKILL);
  if (ok) return {"kvm", "a KVM probe boot reached the guest agent"};
  return {"tcg", "/dev/kvm exists but a probe boot did not reach the guest agent within 8 s "
                 "(e.g. nested PVM, which cannot run stock kernels); using TCG"};
}

}  // namespace airlock::vmmd
