#include "vmmd/qemu_backend.h"

#include <algorithm>

#include "gtest/gtest.h"

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
  EXPECT_EQ(After(args, "-M"), "microvm");
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
  EXPECT_EQ(After(args, "-M"), "microvm,memory-backend=mem");
  EXPECT_EQ(After(args, "-object"), "memory-backend-memfd,id=mem,size=1024M,share=on");
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  EXPECT_NE(joined.find("vhost-user-fs-device,chardev=fs0,tag=airlock0"), std::string::npos);
  EXPECT_EQ(After(QemuBackend().Args(Config()), "-M"), "microvm");
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

TEST(HostTscTest, ReadsAValueOnThisHost) {
  // Every x86 Linux host shows a TSC or CPU frequency somewhere.
  EXPECT_GT(HostTscKhz(), 100000u);
}

}  // namespace
}  // namespace airlock::vmmd
