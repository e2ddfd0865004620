#include "vmmd/qemu_backend.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "vmmd/fake_qmp.h"

namespace airlock::vmmd {
namespace {

VmConfig Config() {
  VmConfig c;
  c.name = "box1";
  c.dir = "/state/sandboxes/box1";
  c.kernel = "/img/kernel/vmlinux";
  c.initrd = "/img/initramfs/initramfs.cpio";
  c.disk = "/state/sandboxes/box1/disk.qcow2";
  c.cpus = 2;
  c.memory_mib = 1024;
  c.accelerator = "tcg";
  c.agent_socket = "/run/airlock/vms/box1.sock";
  c.console_log = "/state/sandboxes/box1/console.log";
  c.vmm_log = "/state/sandboxes/box1/vmm.log";
  return c;
}

std::string After(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
}

TEST(QemuBackendTest, MicrovmWithoutNetworkAndWithAgentChannel) {
  QemuBackend q("qemu-system-x86_64");
  auto args = q.Args(Config());
  EXPECT_EQ(After(args, "-M"), "microvm,pcie=on");
  EXPECT_EQ(After(args, "-accel"), "tcg,tb-size=256");
  EXPECT_EQ(After(args, "-smp"), "2");
  EXPECT_EQ(After(args, "-m"), "1024M");
  EXPECT_NE(std::find(args.begin(), args.end(), "-nodefaults"), args.end());
  for (const auto& a : args) {
    EXPECT_EQ(a.find("-netdev"), std::string::npos) << "the guest must have no NIC";
    EXPECT_EQ(a.find("virtio-net"), std::string::npos);
  }
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  EXPECT_NE(joined.find("socket,id=agent,path=/run/airlock/vms/box1.sock,server=on,wait=off"),
            std::string::npos);
  EXPECT_NE(joined.find("virtserialport,chardev=agent,name=airlock.agent"), std::string::npos);
  EXPECT_NE(joined.find(q.Marker(Config())), std::string::npos);
}

TEST(QemuBackendTest, SharesAddSharedMemoryAndVhostUserFs) {
  VmConfig c = Config();
  c.shares.push_back({"airlock0", "/run/airlock/vms/box1.fs0.sock"});
  auto args = QemuBackend().Args(c);
  EXPECT_EQ(After(args, "-M"), "microvm,pcie=on,memory-backend=mem");
  EXPECT_EQ(After(args, "-object"), "memory-backend-memfd,id=mem,size=1024M,share=on");
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  EXPECT_NE(joined.find("vhost-user-fs-device,chardev=fs0,tag=airlock0"), std::string::npos);
  EXPECT_EQ(After(QemuBackend().Args(Config()), "-M"), "microvm,pcie=on");
}

TEST(QemuBackendTest, ARestoreMapsItsMemoryImageAsTheMachinesRam) {
  VmConfig c = Config();
  c.incoming_socket = "/run/airlock/vms/box1/incoming.sock";
  c.memory_image = "/var/lib/airlock/snapshots/k/ram";
  auto args = QemuBackend().Args(c);
  // The RAM block keeps the name `-m` gives it, the one the snapshot's
  // stream names; the image reaches QEMU as fd 4, never by its path.
  EXPECT_EQ(After(args, "-M"), "microvm,pcie=on,memory-backend=microvm.ram");
  EXPECT_EQ(After(args, "-object"),
            "memory-backend-file,id=microvm.ram,size=1024M,mem-path=/proc/self/fd/4,share=on");
  EXPECT_EQ(After(args, "-incoming"), "unix:/run/airlock/vms/box1/incoming.sock");
  for (const auto& a : args) EXPECT_EQ(a.find("snapshots/k/ram"), std::string::npos) << a;
  // The snapshot's key does not depend on how a VM restores it.
  QemuBackend q;
  ASSERT_FALSE(q.Describe(c).empty()) << "needs qemu-system-x86_64 on PATH";
  EXPECT_EQ(q.Describe(c), q.Describe(Config()));
}

TEST(QemuBackendTest, EveryVmHasEmptyHotplugSlotsForShares) {
  QemuBackend q;
  ASSERT_EQ(q.HotplugShares(), kShareHotplugSlots);
  VmConfig restored = Config();
  restored.memory_image = "/var/lib/airlock/snapshots/k/ram";
  for (const VmConfig& c : {Config(), restored}) {
    auto args = q.Args(c);
    std::vector<std::string> ports;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "-device" && absl::StartsWith(args[i + 1], "pcie-root-port,")) {
        ports.push_back(args[i + 1]);
      }
    }
    ASSERT_EQ(ports.size(), kShareHotplugSlots);
    EXPECT_EQ(ports[0], "pcie-root-port,id=hotplug0,bus=pcie.0,chassis=1");
    EXPECT_EQ(ports[3], "pcie-root-port,id=hotplug3,bus=pcie.0,chassis=4");
    // Without it the guest kernel leaves the ports' hot-plug to firmware
    // microvm does not have, and a plugged device is never seen.
    EXPECT_NE(After(args, "-append").find(" pcie_ports=native"), std::string::npos);
  }
}

TEST(QemuBackendTest, AttachSharePlugsVhostUserFsIntoItsSlot) {
  testing::ShortTempDir dir;
  VmConfig c = Config();
  c.qmp_socket = dir.path() + "/qmp.sock";
  std::vector<nlohmann::json> got;
  {
    FakeQmp qemu(c.qmp_socket, [&](const nlohmann::json& cmd) -> std::string {
      got.push_back(cmd);
      return "{\"return\": {}}\r\n";
    });
    ASSERT_TRUE(QemuBackend().AttachShare(c, 2, {"airlock0", "/run/w/fs0.sock"}).ok());
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1]["execute"], "chardev-add");
  EXPECT_EQ(got[1]["arguments"]["id"], "hotplugfs2");
  EXPECT_EQ(got[1]["arguments"]["backend"]["data"]["addr"]["data"]["path"], "/run/w/fs0.sock");
  EXPECT_EQ(got[1]["arguments"]["backend"]["data"]["server"], false);
  EXPECT_EQ(got[2]["execute"], "device_add");
  EXPECT_EQ(got[2]["arguments"]["driver"], "vhost-user-fs-pci");
  EXPECT_EQ(got[2]["arguments"]["bus"], "hotplug2");
  EXPECT_EQ(got[2]["arguments"]["chardev"], "hotplugfs2");
  EXPECT_EQ(got[2]["arguments"]["tag"], "airlock0");
}

TEST(QemuBackendTest, AttachShareSaysWhatQemuRefused) {
  testing::ShortTempDir dir;
  VmConfig c = Config();
  c.qmp_socket = dir.path() + "/qmp.sock";
  {
    FakeQmp qemu(c.qmp_socket, [&](const nlohmann::json& cmd) -> std::string {
      if (cmd["execute"] == "device_add") {
        return "{\"error\": {\"class\": \"GenericError\", \"desc\": \"Bus 'hotplug0' is full\"}}\r\n";
      }
      return "{\"return\": {}}\r\n";
    });
    absl::Status s = QemuBackend().AttachShare(c, 0, {"airlock0", "/run/w/fs0.sock"});
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(), "cannot add the share's device: QEMU refused device_add: Bus 'hotplug0' is full");
  }
  absl::Status none = QemuBackend().AttachShare(c, kShareHotplugSlots, {"airlock0", "/s"});
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.message(), "no hot-plug slot 4 (a VM has 4)");
}

TEST(QemuBackendTest, KvmUsesHostCpuAndNoTscHint) {
  VmConfig c = Config();
  c.accelerator = "kvm";
  auto args = QemuBackend().Args(c);
  EXPECT_EQ(After(args, "-accel"), "kvm");
  EXPECT_EQ(After(args, "-cpu"), "host");
  EXPECT_EQ(After(args, "-append").find("tsc_early_khz"), std::string::npos);
}

TEST(QemuBackendTest, MarkerOfOneSandboxIsNotInAnothersCommandLine) {
  VmConfig a = Config();
  VmConfig b = Config();
  b.disk = "/state/sandboxes/box10/disk.qcow2";
  QemuBackend q;
  std::string joined;
  for (const auto& s : q.Args(b)) joined += s + " ";
  EXPECT_EQ(joined.find(q.Marker(a)), std::string::npos);
}

TEST(QemuBackendTest, DockerDiskIsARawDriveWithItsSerial) {
  VmConfig c = Config();
  std::string plain;
  for (const auto& s : QemuBackend().Args(c)) plain += s + " ";
  EXPECT_EQ(plain.find("docker"), std::string::npos);
  c.docker_disk = "/state/sandboxes/box1/docker.img";
  auto args = QemuBackend().Args(c);
  std::string joined;
  for (const auto& s : args) joined += s + " ";
  EXPECT_NE(joined.find("file=/state/sandboxes/box1/docker.img,format=raw,if=none,id=docker"),
            std::string::npos);
  EXPECT_NE(joined.find("virtio-blk-device,drive=docker,serial=airlock-docker"),
            std::string::npos);
  // The root disk stays the first block device (the guest's /dev/vda).
  EXPECT_LT(joined.find("drive=root"), joined.find("drive=docker"));
  EXPECT_NE(After(args, "-append").find("airlock.docker=1"), std::string::npos);
}

TEST(KernelCmdlineTest, CarriesTscAndName) {
  std::string c = KernelCmdline("box1", 2445408, false);
  EXPECT_NE(c.find("tsc_early_khz=2445408"), std::string::npos);
  EXPECT_NE(c.find("lpj=9781632"), std::string::npos);
  EXPECT_NE(c.find("airlock.hostname=box1"), std::string::npos);
  EXPECT_EQ(c.find("airlock.probe"), std::string::npos);
  EXPECT_NE(KernelCmdline("p", 0, true).find("airlock.probe=1"), std::string::npos);
}

TEST(KernelCmdlineTest, SkipsOnlyStartUpWorkTheGuestHasNoUseFor) {
  std::string c = KernelCmdline("a", 0, false);
  const std::string flag = " initcall_blacklist=";
  size_t at = c.find(flag);
  ASSERT_NE(at, std::string::npos) << c;
  size_t from = at + flag.size();
  std::string list = c.substr(from, c.find(' ', from) - from);
  std::vector<std::string> names = absl::StrSplit(list, ',');
  EXPECT_NE(std::find(names.begin(), names.end(), "tracer_init_tracefs"), names.end());
  // What the guest needs: ACPI (its devices), the PCIe ports (shares are
  // plugged into them), IPv6 sockets, the crypto API and TCP's default
  // congestion control.
  for (const char* needed : {"acpi_init", "pcie_portdrv_init", "inet6_init", "inet_init",
                             "crypto_algapi_init", "cubictcp_register", "cmos_init"}) {
    EXPECT_EQ(std::find(names.begin(), names.end(), needed), names.end()) << needed;
  }
  // Every VM, the probe's too, boots the same way.
  EXPECT_NE(KernelCmdline("p", 0, true).find(list), std::string::npos);
}

TEST(KernelCmdlineTest, GuestAslrOffOnlyWhereAsked) {
  EXPECT_EQ(KernelCmdline("a", 0, false).find("airlock.aslr"), std::string::npos);
  EXPECT_NE(KernelCmdline("a", 0, false, false, false, false).find(" airlock.aslr=0"),
            std::string::npos);
  // auto: off under TCG only.
  EXPECT_FALSE(GuestAslr("auto", "tcg"));
  EXPECT_TRUE(GuestAslr("auto", "kvm"));
  EXPECT_FALSE(GuestAslr("auto", ""));
  EXPECT_TRUE(GuestAslr("on", "tcg"));
  EXPECT_FALSE(GuestAslr("off", "kvm"));
  QemuBackend qemu;
  VmConfig c;
  c.name = "aslr";
  c.accelerator = "tcg";
  EXPECT_NE(After(qemu.Args(c), "-append").find("airlock.aslr=0"), std::string::npos);
  c.guest_aslr = "on";
  EXPECT_EQ(After(qemu.Args(c), "-append").find("airlock.aslr"), std::string::npos);
  c.guest_aslr = "auto";
  c.accelerator = "kvm";
  EXPECT_EQ(After(qemu.Args(c), "-append").find("airlock.aslr"), std::string::npos);
}

TEST(HostTscTest, ReadsAValueOnThisHost) {
  // Every x86 Linux host shows a TSC or CPU frequency somewhere.
  EXPECT_GT(HostTscKhz(), 100000u);
}

TEST(QemuJailTest, BindsTheDiskChainReadOnlyAndItsOwnFilesWritable) {
  airlock::testing::ShortTempDir d;
  const std::string& p = d.path();
  ASSERT_EQ(RunCommand({"qemu-img", "create", "-q", "-f", "raw", p + "/base.raw", "1M"}).exit_code, 0);
  ASSERT_EQ(RunCommand({"qemu-img", "create", "-q", "-f", "qcow2", "-b", p + "/base.raw", "-F",
                        "raw", p + "/mid.qcow2"}).exit_code, 0);
  // A relative backing name is resolved against the image's directory.
  ASSERT_EQ(RunCommand({"qemu-img", "create", "-q", "-f", "qcow2", "-b", "mid.qcow2", "-F",
                        "qcow2", p + "/top.qcow2"}).exit_code, 0);
  auto chain = QcowBackingChain(p + "/top.qcow2");
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(*chain, (std::vector<std::string>{p + "/mid.qcow2", p + "/base.raw"}));
  EXPECT_TRUE(QcowBackingChain(p + "/base.raw")->empty());
  EXPECT_FALSE(QcowBackingChain(p + "/absent.qcow2").ok());

  VmConfig c = Config();
  c.disk = p + "/top.qcow2";
  c.jail_uid = 1879048192;
  c.jail_root = p + "/root";
  c.socket_dir = "/run/airlock/vms/box1";
  // The disk is the jail's to write: a backing file outside the image
  // store is refused, never bound.
  c.backing_dir = p + "/store";
  auto altered = QemuJail(c);
  ASSERT_FALSE(altered.ok());
  EXPECT_NE(altered.status().message().find("is not in the image store"), std::string::npos)
      << altered.status();
  c.backing_dir = p;
  auto spec = QemuJail(c);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto mount = [&](const std::string& path) -> const JailMount* {
    for (const auto& m : spec->mounts) {
      if (m.path == path) return &m;
    }
    return nullptr;
  };
  ASSERT_NE(mount(p + "/mid.qcow2"), nullptr);
  EXPECT_TRUE(mount(p + "/mid.qcow2")->read_only);
  EXPECT_TRUE(mount(p + "/base.raw")->read_only);
  EXPECT_FALSE(mount(p + "/top.qcow2")->read_only);
  EXPECT_FALSE(mount(c.console_log)->read_only);
  EXPECT_FALSE(mount(c.socket_dir)->read_only);
  EXPECT_EQ(mount(c.kernel)->target, kJailKernel);
  EXPECT_EQ(mount(c.initrd)->target, kJailInitrd);
  EXPECT_EQ(mount(c.dir), nullptr) << "the sandbox's directory holds more than QEMU needs";
  EXPECT_EQ(spec->hostname, "airlock-box1");
  EXPECT_TRUE(spec->keep_caps.empty());
  for (const auto& dev : spec->devices) EXPECT_NE(dev.path, "/dev/kvm") << "TCG needs no KVM";
  c.accelerator = "kvm";
  bool kvm = false;
  auto with_kvm = QemuJail(c);
  ASSERT_TRUE(with_kvm.ok());
  for (const auto& dev : with_kvm->devices) kvm = kvm || (dev.path == "/dev/kvm" && dev.owned);
  EXPECT_TRUE(kvm) << "KVM: a /dev/kvm node of the jail's uid alone";
}

TEST(QemuJailTest, MemoryLimitIsTheGuestPlusABoundedOverhead) {
  VmConfig c = Config();
  EXPECT_EQ(VmMemoryLimitMib(c), 1024u + kTcgCacheMib + 384);
  c.accelerator = "kvm";
  EXPECT_EQ(VmMemoryLimitMib(c), 1024u + 384);
}

TEST(QemuBackendTest, TheTranslationCacheIsTheConfiguredSizeAndTheLimitFollowsIt) {
  QemuBackend q("qemu-system-x86_64");
  VmConfig c = Config();
  c.tcg_cache_mib = 64;
  EXPECT_EQ(After(q.Args(c), "-accel"), "tcg,tb-size=64");
  EXPECT_EQ(VmMemoryLimitMib(c), 1024u + 64 + 384);
  c.accelerator = "kvm";
  EXPECT_EQ(After(q.Args(c), "-accel"), "kvm") << "KVM has no translation cache";
}

TEST(QemuBackendTest, BuildNamesTheBinaryAndChangesWithIt) {
  testing::ShortTempDir dir;
  std::string qemu = dir.path() + "/qemu-system-x86_64";
  std::ofstream(qemu) << "#!/bin/sh\n";
  ASSERT_EQ(chmod(qemu.c_str(), 0755), 0);
  std::string before = QemuBackend(qemu).Build();
  EXPECT_EQ(before.rfind(qemu + ":10:", 0), 0u) << before;
  // Another QEMU installed at the same path (size and change time differ).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::ofstream(qemu, std::ios::app) << "# 7.2.5\n";
  EXPECT_NE(QemuBackend(qemu).Build(), before);
  // Found on PATH when named bare; "" when there is none.
  std::string sh = QemuBackend("sh").Build();
  EXPECT_EQ(sh.front(), '/') << sh;
  EXPECT_NE(sh.find("/sh:"), std::string::npos) << sh;
  EXPECT_EQ(QemuBackend(dir.path() + "/none").Build(), "");
}

TEST(QemuBackendTest, TheMostSharesFillTheVirtioSlotsTheGuestCanUse) {
  QemuBackend qemu;
  for (bool docker : {false, true}) {
    VmConfig c;
    c.name = "slots";
    c.accelerator = "tcg";
    c.memory_mib = 1024;
    c.cpus = 1;
    if (docker) c.docker_disk = "/tmp/docker.img";
    for (int i = 0; i < qemu.MaxShares(docker); ++i) {
      VmShare share;
      share.tag = "airlock" + std::to_string(i);
      share.socket = "/tmp/fs" + std::to_string(i) + ".sock";
      c.shares.push_back(share);
    }
    // Devices on the virtio-mmio bus (virtio-...-device; the serial
    // ports' device is on PCI).
    int slots = 0;
    std::vector<std::string> args = qemu.Args(c);
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] != "-device") continue;
      std::string type = args[i + 1].substr(0, args[i + 1].find(','));
      if (absl::EndsWith(type, "-device") && (absl::StartsWith(type, "virtio-") ||
                                              absl::StartsWith(type, "vhost-user-fs-"))) {
        ++slots;
      }
    }
    EXPECT_EQ(slots, 23) << (docker ? "with docker" : "without docker");
  }
}

}  // namespace
}  // namespace airlock::vmmd
