// A secret's or a Kit binding's request as secretsd takes it: every
// check that needs no database, and the normalized hosts and domains the
// store keeps.
#include "secretsd/secret_specs.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/inject_format.h"
#include "secretsd/services.h"
#include "secretsd/validation.h"

namespace airlock::secretsd {
namespace {

std::string KnownServices() {
  std::vector<std::string> names;
  for (const auto& s : BuiltinServices()) names.push_back(s.name);
  return absl::StrJoin(names, ", ");
}

// True when `host` (normalized) is one of the built-in hosts of `def`, as
// Resolve matches a request's host.
bool IsServiceHost(const ServiceDef& def, absl::string_view host) {
  for (const auto& sh : def.hosts) {
    if (HostMatches(sh.host, host)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ValidateSpec(const SecretSpec& spec) {
  switch (spec.scope) {
    case Scope::kGlobal:
      if (!spec.sandbox.empty()) {
        return absl::InvalidArgumentError("sandbox must be empty for a GLOBAL secret");
      }
      break;
    case Scope::kSandbox:
      if (spec.sandbox.empty()) {
        return absl::InvalidArgumentError("sandbox is required for a SANDBOX secret");
      }
      if (absl::Status s = ValidateSandboxName(spec.sandbox); !s.ok()) return s;
      break;
    default:
      return absl::InvalidArgumentError("scope is required (GLOBAL or SANDBOX)");
  }
  if (absl::Status s = ValidateValue(spec.value); !s.ok()) return s;
  bool custom = !spec.env.empty() || !spec.hosts.empty() || !spec.placeholder.empty();
  if (!spec.service.empty() && custom) {
    return absl::InvalidArgumentError(
        "service and the custom fields (env, hosts, placeholder) are mutually exclusive: give "
        "a service alone, or env and hosts");
  }
  if (spec.service.empty() && !custom) {
    return absl::InvalidArgumentError(absl::StrCat(
        "service is empty and no custom env and hosts (nor a registry) are given; built-in "
        "services: ",
        KnownServices()));
  }
  std::vector<std::string> hosts;
  if (!spec.service.empty()) {
    if (FindService(spec.service) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("service ", QuoteForMessage(spec.service),
                       " is not built in; built-in services: ", KnownServices()));
    }
    return hosts;
  }
  if (absl::Status s = ValidateEnvName(spec.env); !s.ok()) return s;
  if (const ServiceDef* owner = ServiceOwningEnv(spec.env); owner != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("env ", spec.env,
                                                   " belongs to built-in service ", owner->name,
                                                   "; set service=", owner->name, " instead"));
  }
  if (spec.hosts.empty()) {
    return absl::InvalidArgumentError("hosts: a custom secret needs at least one host");
  }
  if (spec.hosts.size() > kMaxHostsPerSecret) {
    return absl::InvalidArgumentError(
        absl::StrCat("hosts: at most ", kMaxHostsPerSecret, " hosts per secret"));
  }
  std::set<std::string> seen;
  for (const auto& h : spec.hosts) {
    auto norm = NormalizeHostPattern(h);
    if (!norm.ok()) return norm.status();
    if (seen.insert(*norm).second) hosts.push_back(*norm);
  }
  if (!spec.placeholder.empty()) {
    if (absl::Status s = ValidatePlaceholder(spec.placeholder); !s.ok()) return s;
    // The guest would hold the real value.
    if (spec.placeholder == spec.value) {
      return absl::InvalidArgumentError("placeholder must differ from value");
    }
  }
  return hosts;
}

absl::StatusOr<std::string> NormalizeRegistryHost(absl::string_view field, absl::string_view host) {
  const std::string h = absl::AsciiStrToLower(host);
  absl::string_view name = h;
  absl::string_view port;
  bool ok = true;
  if (size_t colon = name.find(':'); colon != absl::string_view::npos) {
    port = name.substr(colon + 1);
    name = name.substr(0, colon);
    uint32_t number = 0;
    ok = !port.empty() && port.size() <= 5 && port[0] != '0' &&
         std::all_of(port.begin(), port.end(), absl::ascii_isdigit) &&
         absl::SimpleAtoi(port, &number) && number <= 65535;
  }
  ok = ok && !name.empty() && name.back() != '.' && NormalizeHostName(name).ok();
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", QuoteForMessage(host),
                     " is not a registry host[:port]: labels of a-z, 0-9 and '-' separated by '.', "
                     "optionally :PORT from 1 to 65535 (e.g. ghcr.io, localhost:5000)"));
  }
  return h;
}

absl::StatusOr<std::string> ValidateRegistrySpec(const SecretSpec& spec) {
  if (spec.scope == Scope::kSandbox || !spec.sandbox.empty()) {
    return absl::InvalidArgumentError(
        "scope: a registry secret is always GLOBAL (set no sandbox): it is the host's, for "
        "image pulls, and no guest sees it");
  }
  if (!spec.service.empty() || !spec.env.empty() || !spec.hosts.empty() ||
      !spec.placeholder.empty()) {
    return absl::InvalidArgumentError(
        "registry and the service and custom fields (service, env, hosts, placeholder) are "
        "mutually exclusive: a registry secret has no env var and no sentinel");
  }
  auto host = NormalizeRegistryHost("registry", spec.registry);
  if (!host.ok()) return host.status();
  if (absl::Status s = ValidateValue(spec.value); !s.ok()) return s;
  // A Basic user name holds no ':', so the first one ends it.
  size_t colon = spec.value.find(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        "value: a registry credential is USERNAME:PASSWORD, with a non-empty username");
  }
  return host;
}


absl::StatusOr<std::vector<KitBinding>> ValidateBindings(const std::string& sandbox,
                                                         const std::vector<KitBinding>& bindings) {
  if (absl::Status s = ValidateSandboxName(sandbox); !s.ok()) return s;
  std::set<std::string> services;
  std::vector<KitBinding> out;
  for (size_t i = 0; i < bindings.size(); ++i) {
    const KitBinding& b = bindings[i];
    auto bad = [i](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("credentials[", i, "]: ", why));
    };
    if (absl::Status s = ValidateServiceHandle(b.service); !s.ok()) return bad(s.message());
    if (!services.insert(b.service).second) {
      return bad(absl::StrCat("service ", QuoteForMessage(b.service),
                              " is bound twice; one binding per service"));
    }
    if (b.suppress && (!b.env.empty() || !b.inject.empty())) {
      return bad(absl::StrCat("suppress: the binding of ", QuoteForMessage(b.service),
                              " hides the service, so its env and inject must be empty"));
    }
    if (!b.env.empty()) {
      if (absl::Status s = ValidateKitEnvName(b.env); !s.ok()) return bad(s.message());
    }
    if (b.inject.size() > kMaxHostsPerSecret) {
      return bad(absl::StrCat("inject: at most ", kMaxHostsPerSecret, " entries per service"));
    }
    // A built-in service's secret is the user's: a Kit picks among its
    // hosts, never another. A service not built in has no stored secret.
    const ServiceDef* def = FindService(b.service);
    KitBinding norm{b.service, b.env, {}, b.suppress};
    std::set<std::string> domains;
    for (size_t j = 0; j < b.inject.size(); ++j) {
      const std::string at = absl::StrCat("inject[", j, "].");
      auto domain = NormalizeHostName(b.inject[j].domain);
      if (!domain.ok()) return bad(absl::StrCat(at, domain.status().message()));
      // Resolve gives one format per host.
      if (!domains.insert(*domain).second) {
        return bad(absl::StrCat(at, "domain ", QuoteForMessage(*domain),
                                " is listed twice for the service; one format per domain"));
      }
      if (def != nullptr && !IsServiceHost(*def, *domain)) {
        return bad(absl::StrCat(at, "domain: kit credential ", def->name, ": inject domain ",
                                QuoteForMessage(*domain), " is not one of ", def->name,
                                "'s hosts (", absl::StrJoin(def->HostNames(), ", "),
                                "); a kit cannot send a stored secret elsewhere"));
      }
      // The formats proxyd places, by proxyd's own parser.
      auto format = ParseFormat(b.inject[j].format);
      if (!format.ok()) return bad(absl::StrCat(at, format.status().message()));
      // "replace" swaps the sentinel anywhere in the request, body included:
      // with a built-in service's shared sentinel the guest could have the
      // service publish the real value (a gist, an issue).
      if (b.inject[j].format == kFormatReplace) {
        return bad(absl::StrCat(at, "format: a kit cannot place a stored secret with "
                                    "\"replace\"; use a header, bearer or basic format"));
      }
      norm.inject.push_back(KitInject{*domain, b.inject[j].format});
    }
    out.push_back(std::move(norm));
  }
  return out;
}

}  // namespace airlock::secretsd
