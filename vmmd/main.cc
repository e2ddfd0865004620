// vmmd: sandbox lifecycle, the hypervisor processes, guest images and the
// guest agent channel. This file only reads options and wires objects.
#include "common/daemon_runtime.h"
#include "common/log.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/paths.h"
#include "vmmd/image_catalog.h"
#include "vmmd/registry_auth.h"
#include "vmmd/qemu_backend.h"
#include "vmmd/sandbox_manager.h"
#include "vmmd/sandbox_store.h"
#include "vmmd/vmm_service.h"
#include "common/peer.h"

int main(int argc, char** argv) {
  std::vector<airlock::OptionSpec> options = {
      {"image-dir", "guest images built by tools/build_images.sh", airlock::DefaultImageDir()},
      {"accel", "accelerator: auto (probe KVM, else TCG), kvm or tcg", "auto"},
      {"boot-timeout", "seconds a boot may take before it fails", "180"},
      {"qemu", "QEMU system emulator binary", "qemu-system-x86_64"},
      {"default-registry", "registry of references without a host", "docker.io"},
      {"registry-mirror", "host[:port] that docker.io references are pulled from",
       "registry-1.docker.io"},
      {"registry-certs-dir", "per-registry CA files: DIR/<host[:port]>/ca.crt (as docker's "
       "certs.d)", "/etc/airlock/certs.d"},
      {"build-scratch", "tmpfs where image boot disks are unpacked before mkfs (faster than "
                        "the state dir's disk; the state dir is used when it lacks room); "
                        "empty: always the state dir", "/dev/shm"},
      {"insecure-registries", "comma-separated host:port list pulled over plain HTTP", ""},
      {"jail", "run each sandbox's QEMU and virtiofsd jailed: a uid block of its own, no "
               "capabilities, own namespaces and root, a cgroup with limits (false: as vmmd, "
               "for debugging only)", "true"},
      {"snapshots", "start new sandboxes of an image booted before by restoring a snapshot of a "
                    "fresh guest (true) or always boot (false)", "true"},
      {"warm-pool", "VMs restored ahead of need from the snapshot a sandbox last started "
                    "from, each claimed by the next new sandbox of that shape (0 to 8; 0: "
                    "none; each holds an idle sandbox's host memory)", "1"},
      {"jail-id-base", "first host uid/gid of the jails' pool (blocks of 65536 per sandbox)",
       "1879048192"},
      {"tcg-cache-mib", "TCG's translation cache of each VM, MiB (32 to 2048; not used under "
                        "KVM): an idle sandbox keeps what it filled, a smaller one retranslates "
                        "more", "256"},
      {"guest-aslr", "address space randomization of the guests' processes: auto (off under "
                     "TCG, where every process start would translate its libraries' code "
                     "again: ~25 ms instead of ~4.5 here; on under KVM), on or off", "auto"},
  };
  for (auto& o : airlock::PeerOptions({"gitd", "proxyd", "secretsd", "policyd"})) {
    options.push_back(std::move(o));
  }
  return airlock::DaemonMain("vmmd", argc, argv, options, [](airlock::DaemonRuntime& rt) {
    const airlock::DaemonConfig& c = rt.config();
    std::string accel = c.options.at("accel");
    if (accel != "auto" && accel != "kvm" && accel != "tcg") {
      return absl::InvalidArgumentError("--accel must be auto, kvm or tcg");
    }
    airlock::vmmd::ManagerOptions mo;
    const std::string& jail = c.options.at("jail");
    if (jail != "true" && jail != "false") {
      return absl::InvalidArgumentError("--jail must be true or false");
    }
    mo.jail = jail == "true";
    const std::string& snapshots = c.options.at("snapshots");
    if (snapshots != "true" && snapshots != "false") {
      return absl::InvalidArgumentError("--snapshots must be true or false");
    }
    mo.snapshots = snapshots == "true";
    if (!absl::SimpleAtoi(c.options.at("warm-pool"), &mo.warm_pool) || mo.warm_pool > 8) {
      return absl::InvalidArgumentError("--warm-pool must be a number of VMs from 0 to 8");
    }
    uint64_t id_base = 0;
    if (!absl::SimpleAtoi(c.options.at("jail-id-base"), &id_base) || id_base < 65536 ||
        id_base + uint64_t{airlock::vmmd::kJailIdsPerSandbox} * airlock::vmmd::kJailSlots >
            UINT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--jail-id-base must be a uid from 65536 up, with room for ",
          airlock::vmmd::kJailSlots, " blocks of ", airlock::vmmd::kJailIdsPerSandbox,
          " ids below 2^32"));
    }
    mo.jail_id_base = static_cast<uint32_t>(id_base);
    if (!absl::SimpleAtoi(c.options.at("tcg-cache-mib"), &mo.tcg_cache_mib) ||
        mo.tcg_cache_mib < airlock::vmmd::kMinTcgCacheMib ||
        mo.tcg_cache_mib > airlock::vmmd::kMaxTcgCacheMib) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tcg-cache-mib must be a number of MiB from ", airlock::vmmd::kMinTcgCacheMib, " to ",
          airlock::vmmd::kMaxTcgCacheMib));
    }
    mo.guest_aslr = c.options.at("guest-aslr");
    if (mo.guest_aslr != "auto" && mo.guest_aslr != "on" && mo.guest_aslr != "off") {
      return absl::InvalidArgumentError("--guest-aslr must be auto, on or off");
    }
    mo.state_dir = c.state_dir;
    mo.runtime_dir = c.runtime_dir;
    mo.image_dir = c.options.at("image-dir");
    mo.accelerator = accel;
    mo.boot_timeout_s = std::atoi(c.options.at("boot-timeout").c_str());
    for (auto [peer, name] : {std::pair{&mo.gitd, "gitd"}, std::pair{&mo.proxyd, "proxyd"},
                              std::pair{&mo.policyd, "policyd"},
                              std::pair{&mo.secretsd, "secretsd"}}) {
      auto p = airlock::PeerFromConfig(c, name);
      if (!p.ok()) return p.status();
      *peer = *std::move(p);
    }
    if (mo.boot_timeout_s <= 0) return absl::InvalidArgumentError("--boot-timeout must be > 0");
    airlock::vmmd::SandboxStore store(&rt.state());
    if (absl::Status s = store.Init(); !s.ok()) return s;
    auto image_store = airlock::vmmd::ImageStore::Open(c.state_dir + "/images", &rt.state(),
                                                       c.options.at("build-scratch"));
    if (!image_store.ok()) return image_store.status();
    airlock::vmmd::RegistryOptions registry;
    registry.docker_io_endpoint = c.options.at("registry-mirror");
    registry.certs_dir = c.options.at("registry-certs-dir");
    for (absl::string_view h : absl::StrSplit(c.options.at("insecure-registries"), ',',
                                              absl::SkipWhitespace())) {
      registry.insecure.insert(std::string(h));
    }
    // Registry credentials stay in secretsd; vmmd asks for them per pull.
    registry.credentials = [secretsd = mo.secretsd](const std::string& host) {
      return airlock::vmmd::SecretsRegistryCredentials(secretsd, host);
    };
    airlock::vmmd::ImageCatalog images(image_store->get(), registry, mo.image_dir,
                                       c.options.at("default-registry"));
    if (absl::Status s = images.EnsureBuiltIn(); !s.ok()) return s;
    airlock::vmmd::SandboxManager manager(
        mo, &store, &images, std::make_unique<airlock::vmmd::QemuBackend>(c.options.at("qemu"),
                                                      mo.jail ? mo.jail_id_base : 0),
        airlock::vmmd::HostFacts::Read());
    images.SetUsage([&manager] { return manager.ImageUsage(); });
    if (absl::Status s = manager.Recover(); !s.ok()) return s;
    airlock::vmmd::VmmService service(&manager, &images);
    return rt.Serve({&service}, [&] { manager.Shutdown(); });
  });
}
