// apid: the Cloud Sandboxes-compatible REST API (management and each
// sandbox's data plane) over HTTP, a gRPC client of vmmd, policyd, proxyd
// and secretsd, with API tokens of its own. This file only reads options and
// wires objects.
#include <cstdlib>
#include <map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apid/api_service.h"
#include "apid/auth.h"
#include "apid/background.h"
#include "apid/data_plane_api.h"
#include "apid/http_server.h"
#include "apid/idempotency.h"
#include "apid/management_api.h"
#include "apid/policy_client.h"
#include "apid/process_table.h"
#include "apid/processes_api.h"
#include "apid/proxy_client.h"
#include "apid/resources_api.h"
#include "apid/router.h"
#include "apid/secrets_client.h"
#include "apid/signer.h"
#include "apid/token_store.h"
#include "apid/vmm_client.h"
#include "common/client.h"
#include "common/daemon_runtime.h"
#include "common/log.h"
#include "common/peer.h"

int main(int argc, char** argv) {
  std::vector<airlock::OptionSpec> options = {
      {"listen", "HTTP address of the REST API (HOST:PORT); not loopback needs --http-tls-*",
       "127.0.0.1:7777"},
      {"http-tls-cert", "PEM certificate chain the REST API serves with (HTTPS)", ""},
      {"http-tls-key", "PEM private key of --http-tls-cert", ""},
      {"public-url", "base URL clients reach the API at (default: from --listen)", ""},
      {"exec-output-limit", "bytes of stdout+stderr a REST exec keeps", "16777216"},
      {"access-token-ttl", "seconds an exchanged access token is valid", "900"},
  };
  for (auto& o : airlock::PeerOptions({"vmmd", "policyd", "proxyd", "secretsd"})) {
    options.push_back(std::move(o));
  }
  return airlock::DaemonMain("apid", argc, argv, options, [](airlock::DaemonRuntime& rt) {
    namespace apid = airlock::apid;
    const airlock::DaemonConfig& c = rt.config();
    std::map<std::string, airlock::Peer> peers;
    for (const char* name : {"vmmd", "policyd", "proxyd", "secretsd"}) {
      auto p = airlock::PeerFromConfig(c, name);
      if (!p.ok()) return p.status();
      peers[name] = *std::move(p);
    }
    size_t exec_limit = 0;
    int64_t access_ttl = 0;
    if (!absl::SimpleAtoi(c.options.at("exec-output-limit"), &exec_limit) || exec_limit == 0) {
      return absl::InvalidArgumentError("--exec-output-limit must be a positive byte count");
    }
    if (!absl::SimpleAtoi(c.options.at("access-token-ttl"), &access_ttl) || access_ttl <= 0) {
      return absl::InvalidArgumentError("--access-token-ttl must be positive seconds");
    }
    apid::TokenStore tokens(&rt.state());
    if (absl::Status s = tokens.Init(); !s.ok()) return s;
    auto signer = apid::Signer::Open(c.state_dir + "/apid.key");
    if (!signer.ok()) return signer.status();
    apid::IdempotencyLedger ledger(&rt.state());
    apid::Authenticator auth(&*signer, &tokens);
    apid::VmmClient vmm(peers["vmmd"].Dial());
    apid::PolicyClient policy(peers["policyd"].Dial());
    apid::ProxyClient proxy(peers["proxyd"].Dial());
    apid::SecretsClient secrets(peers["secretsd"].Dial());
    apid::Background background;

    apid::Router router;
    apid::HttpServerOptions http;
    http.listen = c.options.at("listen");
    http.tls_cert = c.options.at("http-tls-cert");
    http.tls_key = c.options.at("http-tls-key");
    apid::ProcessTable processes(&vmm);
    std::unique_ptr<apid::ProcessesApi> processes_api;
    apid::HttpServer server(
        http, [&router](const apid::HttpRequest& req) { return router.Handle(req); },
        [&processes_api](const apid::HttpRequest& req) { return processes_api->Upgrade(req); });
    if (absl::Status s = server.Listen(); !s.ok()) return s;
    std::string base = c.options.at("public-url");
    if (base.empty()) {
      std::string host = http.listen.substr(0, http.listen.rfind(':'));
      base = absl::StrCat(server.scheme(), "://", host, ":", server.port());
    }
    while (!base.empty() && base.back() == '/') base.pop_back();

    apid::ManagementOptions mo;
    mo.base_url = base;
    mo.access_ttl_s = access_ttl;
    mo.on_deleted = [&processes](const std::string& uid) { processes.Forget(uid); };
    apid::ManagementApi management(mo, &auth, &tokens, &ledger, &vmm, &policy, &background);
    management.Register(&router);
    apid::DataPlaneOptions dpo;
    dpo.base_url = base;
    dpo.exec_output_limit = exec_limit;
    apid::DataPlaneApi data_plane(dpo, &auth, &vmm);
    data_plane.Register(&router);
    processes_api = std::make_unique<apid::ProcessesApi>(base, &auth, &processes);
    processes_api->Register(&router);
    apid::ResourcesApi resources(&auth, &vmm, &policy, &proxy, &secrets);
    resources.Register(&router);
    // Stopping: long calls end first (so handlers return), then no new
    // process can start, then connections close and every thread is joined,
    // all before any object they use is destroyed, however Serve returns.
    auto stop = absl::MakeCleanup([&] {
      vmm.CancelAll();
      processes.Shutdown();
      server.Stop();
      background.Join();
    });
    // Routes are complete before the first connection is accepted.
    if (absl::Status s = server.Start(); !s.ok()) return s;
    AIRLOCK_LOG_INFO("REST API listening", {{"url", base}});

    apid::ApiService service(&tokens, base);
    return rt.Serve({&service}, [&] { std::move(stop).Invoke(); });
  });
}
