#include "apid/sandbox_view.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "apid/signer.h"

namespace airlock::apid {

namespace vmm = airlock::vmm::v1;
namespace wire = airlock::api::wire::v1;

const std::vector<std::string>& EndpointCapabilities() {
  static const std::vector<std::string> caps = {"exec",  "readFile", "writeFile", "stat",
                                                "list",  "remove",   "mkdir",     "move"};
  return caps;
}

std::string EndpointUri(const std::string& base, const std::string& uid) {
  return absl::StrCat(base, "/endpoints/", uid);
}

std::string StatusName(vmm::SandboxState state) {
  switch (state) {
    case vmm::CREATING: return "creating";
    case vmm::STARTING: return "starting";
    case vmm::RUNNING: return "running";
    case vmm::STOPPING: return "stopping";
    case vmm::STOPPED: return "stopped";
    case vmm::FAILED: return "failed";
    default: return "degraded";
  }
}

wire::Sandbox ToWire(const vmm::Sandbox& sb, const std::string& base, bool deleting) {
  const vmm::SandboxSpec& spec = sb.spec();
  const std::string& uid = spec.name();
  wire::Sandbox out;
  out.set_name(absl::StrCat("sandboxes/", uid));
  out.set_uid(uid);
  out.set_display_name(spec.display_name());
  wire::SandboxCore* core = out.mutable_core();
  core->set_agent(spec.agent());
  core->set_status(deleting ? "deleting" : StatusName(sb.state()));
  if (sb.cpus() > 0) core->mutable_resources()->set_cpus(static_cast<int32_t>(sb.cpus()));
  if (sb.memory_mib() > 0) {
    core->mutable_resources()->set_memory_mib(static_cast<int64_t>(sb.memory_mib()));
  }
  core->mutable_platform()->set_os("linux");
  core->mutable_platform()->set_architecture("amd64");
  for (const auto& [k, v] : spec.env()) (*core->mutable_environment())[k] = v;
  for (const auto& [k, v] : spec.labels()) (*core->mutable_labels())[k] = v;
  for (const auto& p : sb.ports()) {
    wire::PublishedPort* w = core->add_ports();
    std::string ip = p.host_ip().empty() ? "127.0.0.1" : p.host_ip();
    w->set_host_ip(ip);
    w->set_host_port(static_cast<int32_t>(p.host_port()));
    w->set_sandbox_port(static_cast<int32_t>(p.sandbox_port()));
    w->set_protocol("tcp");
    w->set_url(absl::StrCat("tcp://", ip, ":", p.host_port()));
  }
  for (const auto& k : spec.kits()) {
    wire::AppliedKit* a = core->add_applied_kits();
    a->set_ref(k);
    a->set_kind("sandbox");
  }
  core->mutable_created_at()->set_seconds(sb.created_at());
  core->set_image_ref(sb.image().name().empty() ? spec.template_() : sb.image().name());
  wire::SandboxEndpoint* ep = core->mutable_endpoint();
  ep->set_uri(EndpointUri(base, uid));
  ep->set_protocol("http");
  ep->set_credential_audience(EndpointUri(base, uid));
  ep->set_sandbox(out.name());
  ep->set_sandbox_uid(uid);
  ep->set_api_version("v1");
  for (const auto& c : EndpointCapabilities()) ep->add_capabilities(c);
  wire::EndpointAuthentication* auth = ep->mutable_authentication();
  auth->set_scheme("scopedBearer");
  auth->mutable_default_ttl()->set_seconds(300);
  auth->mutable_max_ttl()->set_seconds(300);
  auth->add_credential_transports("authorizationHeader");
  if (spec.timeout_seconds() > 0) {
    wire::EffectiveFeatures* f = out.mutable_effective_features();
    f->mutable_lifecycle()->set_stop_memory_outcome("discard");
    f->mutable_output_retention()->mutable_min_duration()->set_seconds(0);
    wire::EffectiveTimeouts* t = f->mutable_timeouts();
    t->set_on_timeout(spec.on_timeout() == vmm::TIMEOUT_STOP ? "stop" : "delete");
    t->mutable_initial_timeout()->set_seconds(static_cast<int64_t>(spec.timeout_seconds()));
    if (sb.expires_at() > 0) t->mutable_expires_at()->set_seconds(sb.expires_at());
  }
  if (sb.state() == vmm::FAILED && !deleting) {
    out.mutable_failure()->set_code("internal");
    out.mutable_failure()->set_message(sb.failure());
  }
  core->set_etag(EtagOf(out));
  return out;
}

std::string EtagOf(const wire::Sandbox& view) {
  wire::Sandbox copy = view;
  copy.mutable_core()->clear_etag();
  // Deterministic bytes (map entries sorted), so equal views hash equal.
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    copy.SerializeToCodedStream(&cos);
  }
  return absl::StrCat("\"", Sha256Hex(bytes).substr(0, 20), "\"");
}

bool EtagMatches(absl::string_view header, const std::string& etag) {
  absl::string_view bare = absl::StripPrefix(etag, "W/");
  for (absl::string_view part : absl::StrSplit(header, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part == "*") return true;
    part = absl::StripPrefix(part, "W/");
    if (!part.empty() && part == bare) return true;
  }
  return false;
}

}  // namespace airlock::apid
