// proxyd: all guest egress. It attaches to each sandbox's egress port,
// follows the sandbox's compiled policy from policyd, decides every
// connection, request and DNS question, intercepts TLS where HTTP rules
// apply, and logs each decision. It never decides policy itself. This file
// only reads options and wires objects.
#include <signal.h>
#include <sys/resource.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/client.h"
#include "common/daemon_runtime.h"
#include "common/malloc_tuning.h"
#include "common/paths.h"
#include "common/peer.h"
#include "proxyd/attachment.h"
#include "proxyd/decision_log.h"
#include "proxyd/proxy_service.h"
#include "proxyd/tls.h"

namespace {

// Schema steps, in order; never edit one that has shipped, append.
const std::vector<std::string> kSchema = {
    "CREATE TABLE decisions (seq INTEGER PRIMARY KEY AUTOINCREMENT, sandbox TEXT NOT NULL, "
    "data BLOB NOT NULL)",
    "CREATE TABLE attachments (sandbox TEXT PRIMARY KEY, channel_path TEXT NOT NULL)",
};

std::vector<std::string> List(const std::string& value) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(item));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  // Every carried byte passes through buffers made and freed per batch.
  airlock::KeepBulkBuffersMapped();
  // Each carried connection holds three descriptors: use the hard limit.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  std::vector<airlock::OptionSpec> options = {
      {"ca-dir", "directory of the interception CA (ca.key 0600, ca.crt; default: <state-dir>/ca)",
       ""},
      {"upstream-ca", "extra CA files (PEM, comma-separated) trusted for upstream TLS, "
                      "beside the host's trust store", ""},
      {"resolve", "static host map, comma-separated NAME=ADDRESS entries resolved before DNS "
                  "(trusted as written, even for loopback)", ""},
      {"trusted-ranges", "comma-separated CIDRs that names allowed by the rules may resolve into "
                         "although protected (split DNS, e.g. 203.0.113.0/24); off by default",
       ""},
      {"upstream-proxy", "HTTP proxy (host:port) that upstream connections go through with "
                         "CONNECT; empty: proxyd connects directly", ""},
      {"no-proxy", "comma-separated host patterns and address ranges reached directly, not "
                   "through upstream-proxy", ""},
      {"terminate-tls", "comma-separated host patterns (name, *.name, **.name, **) whose allowed "
                        "TLS connections proxyd terminates, verifying the upstream against the "
                        "host's trust store (for networks that re-sign TLS); off by default",
       ""},
  };
  for (auto& o : airlock::PeerOptions({"policyd", "secretsd"})) options.push_back(std::move(o));
  return airlock::DaemonMain("proxyd", argc, argv, options, [](airlock::DaemonRuntime& rt) {
    const airlock::DaemonConfig& c = rt.config();
    if (absl::Status s = rt.state().Migrate(kSchema); !s.ok()) return s;
    std::string ca_dir = c.options.at("ca-dir").empty() ? c.state_dir + "/ca" : c.options.at("ca-dir");
    if (absl::Status s = airlock::MakeDirs(ca_dir, 0700); !s.ok()) return s;
    auto ca = airlock::proxyd::CertificateAuthority::LoadOrCreate(ca_dir);
    if (!ca.ok()) return ca.status();
    auto upstream = airlock::proxyd::MakeUpstreamContext(List(c.options.at("upstream-ca")));
    if (!upstream.ok()) return upstream.status();
    auto resolver = airlock::proxyd::Resolver::Make(List(c.options.at("resolve")));
    if (!resolver.ok()) return resolver.status();
    auto network = airlock::proxyd::OperatorNetwork::Make(List(c.options.at("trusted-ranges")),
                                                          List(c.options.at("terminate-tls")),
                                                          c.options.at("upstream-proxy"),
                                                          List(c.options.at("no-proxy")));
    if (!network.ok()) return network.status();
    airlock::proxyd::DecisionLog log(&rt.state());
    if (absl::Status s = log.Init(); !s.ok()) return s;
    airlock::proxyd::ProxyContext px;
    px.ca = ca->get();
    px.upstream_tls = *upstream;
    px.resolver = *resolver;
    px.network = *network;
    if (size_t extra = List(c.options.at("upstream-ca")).size(); extra > 0) {
      px.upstream_trust = absl::StrCat("the host's trust store and ", extra, " upstream-ca file",
                                       extra > 1 ? "s" : "");
    }
    px.log = &log;
    auto policyd = airlock::PeerFromConfig(c, "policyd");
    if (!policyd.ok()) return policyd.status();
    auto secretsd = airlock::PeerFromConfig(c, "secretsd");
    if (!secretsd.ok()) return secretsd.status();
    px.policyd = *std::move(policyd);
    airlock::proxyd::SecretsClient secrets(secretsd->Dial());
    secrets.Start();
    px.secrets = &secrets;
    airlock::proxyd::ProxyService service(&rt.state(), &px);
    if (absl::Status s = service.Init(); !s.ok()) return s;
    return rt.Serve({&service}, [&] {
      service.Shutdown();
      secrets.Stop();
    });
  });
}
