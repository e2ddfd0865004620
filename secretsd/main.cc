// secretsd: the encrypted secret store; resolves plaintext for proxyd only,
// and registry credentials for vmmd only.
// This file only reads options and wires objects.
#include <unistd.h>

#include "common/daemon_runtime.h"
#include "common/log.h"
#include "secretsd/resolver_auth.h"
#include "secretsd/secret_store.h"
#include "secretsd/secrets_service.h"

int main(int argc, char** argv) {
  std::vector<airlock::OptionSpec> options = {
      {"key-file",
       "32-byte AES-256 key, mode 0600; created on first start (default: "
       "<state-dir>/secrets.key)",
       ""},
      {"proxyd-exe",
       "the proxyd binary allowed to resolve secrets over the Unix socket (default: proxyd "
       "beside secretsd, or ../proxyd/proxyd from it)",
       ""},
      {"proxyd-tls-name", "client certificate common name of proxyd on --listen-tcp", "proxyd"},
      {"vmmd-exe",
       "the vmmd binary allowed to resolve registry credentials over the Unix socket (default: "
       "vmmd beside secretsd, or ../vmmd/vmmd from it)",
       ""},
      {"vmmd-tls-name", "client certificate common name of vmmd on --listen-tcp", "vmmd"},
  };
  return airlock::DaemonMain("secretsd", argc, argv, options, [](airlock::DaemonRuntime& rt) {
    namespace sd = airlock::secretsd;
    const airlock::DaemonConfig& c = rt.config();
    std::string key_file =
        c.options.at("key-file").empty() ? c.state_dir + "/secrets.key" : c.options.at("key-file");
    auto self = sd::CanonicalPath("/proc/self/exe");
    if (!self.ok()) return self.status();
    auto proxyd = sd::FindDaemonExecutable("proxyd", c.options.at("proxyd-exe"), *self);
    if (!proxyd.ok()) return proxyd.status();
    if (proxyd->empty()) {
      AIRLOCK_LOG_WARN(
          "no proxyd binary found beside secretsd; every Resolve over the Unix "
          "socket will be refused (set --proxyd-exe)");
    }
    auto vmmd = sd::FindDaemonExecutable("vmmd", c.options.at("vmmd-exe"), *self);
    if (!vmmd.ok()) return vmmd.status();
    if (vmmd->empty()) {
      AIRLOCK_LOG_WARN(
          "no vmmd binary found beside secretsd; every ResolveRegistry over the Unix "
          "socket will be refused (set --vmmd-exe)");
    }
    sd::ResolverPolicy policy{geteuid(), *proxyd, c.options.at("proxyd-tls-name"), *vmmd,
                              c.options.at("vmmd-tls-name")};
    if (absl::Status s = sd::CheckPolicy(policy); !s.ok()) return s;

    auto store = sd::SecretStore::Open(&rt.state(), key_file);
    if (!store.ok()) return store.status();
    sd::SecretsService service(store->get(), policy);
    AIRLOCK_LOG_INFO("secret store open",
                     {{"key_file", key_file}, {"proxyd_exe", *proxyd}, {"vmmd_exe", *vmmd}});
    return rt.Serve({&service}, nullptr, [&] { service.EndStreams(); });
  });
}
