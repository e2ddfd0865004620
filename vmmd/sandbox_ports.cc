// SandboxManager's published ports: opening a running sandbox's mappings,
// closing them, and publishing or unpublishing one while it runs.

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "vmmd/sandbox_manager.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;

void SandboxManager::OpenPorts(const std::string& name) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  ports_.CloseAll(name);
  std::vector<vmm::PortMapping> open;
  std::vector<vmm::PortMapping> requested(sb.spec().ports().begin(), sb.spec().ports().end());
  for (auto& m : requested) {
    auto bound = ports_.Open(name, m, [this, name] { return AgentChannel(name); });
    if (!bound.ok()) {
      AIRLOCK_LOG_WARN("cannot publish port", {{"sandbox", name},
                                               {"error", std::string(bound.status().message())}});
      continue;
    }
    // An ephemeral host port, once chosen, is kept for later boots.
    m.set_host_port(bound->host_port());
    open.push_back(*bound);
  }
  UpdateOrWarn(name, "", [&](vmm::Sandbox& s) {
    s.clear_ports();
    for (const auto& m : open) *s.add_ports() = m;
    s.mutable_spec()->clear_ports();
    for (const auto& m : requested) *s.mutable_spec()->add_ports() = m;
  });
}

void SandboxManager::ClosePorts(const std::string& name) {
  ports_.CloseAll(name);
  UpdateOrWarn(name, "", [](vmm::Sandbox& s) { s.clear_ports(); });
}

absl::StatusOr<vmm::PortMapping> SandboxManager::PublishPort(const std::string& name,
                                                             vmm::PortMapping m) {
  if (absl::Status s = ValidatePortMapping(&m); !s.ok()) return s;
  auto sb = Get(name);
  if (!sb.ok()) return sb.status();
  for (const auto& p : sb->spec().ports()) {
    if (p.sandbox_port() == m.sandbox_port() && p.host_ip() == m.host_ip() &&
        (m.host_port() == 0 || m.host_port() == p.host_port())) {
      return absl::AlreadyExistsError(absl::StrCat("sandbox port ", m.sandbox_port(),
                                                   " is already published on ", p.host_ip(), ":",
                                                   p.host_port()));
    }
  }
  if (sb->state() != vmm::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", name, " is not running (`airlock start ", name, "` first)"));
  }
  auto bound = ports_.Open(name, m, [this, name] { return AgentChannel(name); });
  if (!bound.ok()) return bound.status();
  absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) {
    *sb.add_ports() = *bound;
    *sb.mutable_spec()->add_ports() = *bound;
  });
  if (!s.ok()) {
    ports_.Close(name, *bound);
    return s;
  }
  return *bound;
}

absl::Status SandboxManager::UnpublishPort(const std::string& name, const vmm::PortMapping& m) {
  auto sb = Get(name);
  if (!sb.ok()) return sb.status();
  bool found = false;
  for (const auto& p : sb->spec().ports()) found = found || SameMapping(p, m);
  if (!found) {
    return absl::NotFoundError(absl::StrCat("sandbox ", name, " has no published port ",
                                            m.sandbox_port(), " matching that mapping"));
  }
  ports_.Close(name, m);
  return Update(name, "", [&](vmm::Sandbox& s) {
    auto keep = [&](google::protobuf::RepeatedPtrField<vmm::PortMapping>* list) {
      google::protobuf::RepeatedPtrField<vmm::PortMapping> out;
      for (const auto& p : *list) {
        if (!SameMapping(p, m)) *out.Add() = p;
      }
      list->Swap(&out);
    };
    keep(s.mutable_ports());
    keep(s.mutable_spec()->mutable_ports());
  });
}

absl::StatusOr<std::vector<vmm::PortMapping>> SandboxManager::ListPorts(const std::string& name) {
  auto sb = Get(name);
  if (!sb.ok()) return sb.status();
  const auto& list = sb->state() == vmm::RUNNING ? sb->ports() : sb->spec().ports();
  return std::vector<vmm::PortMapping>(list.begin(), list.end());
}

}  // namespace airlock::vmmd
