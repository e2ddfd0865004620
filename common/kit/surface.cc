#include "common/kit/surface.h"

#include <openssl/evp.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/kit/capabilities.h"
#include "common/kit/document.h"

namespace airlock::kit {
namespace {

using StringSet = std::set<std::string>;

std::vector<std::string> Sorted(const StringSet& s) { return {s.begin(), s.end()}; }

// ---- Projection ----

struct NetworkBuilder {
  StringSet allow_hosts, deny_hosts, http_allow, http_deny;

  NetworkSurface Build() const {
    return {Sorted(allow_hosts), Sorted(deny_hosts), Sorted(http_allow), Sorted(http_deny)};
  }
};

// AddEntries records one allow or deny list: unbounded hosts in `hosts`,
// and the atoms of every entry in `atoms`.
void AddEntries(const std::vector<NetworkEntry>& entries, StringSet* hosts, StringSet* atoms) {
  for (const NetworkEntry& e : entries) {
    std::vector<std::string> methods = e.methods;
    if (methods.empty() || std::find(methods.begin(), methods.end(), "ANY") != methods.end()) {
      methods = {"ANY"};
    }
    std::vector<std::string> paths = e.paths.empty() ? std::vector<std::string>{"/**"} : e.paths;
    for (const std::string& host : e.hosts) {
      if (!e.bounded()) hosts->insert(host);
      for (const std::string& m : methods) {
        for (const std::string& p : paths) atoms->insert(absl::StrCat(m, " ", host, p));
      }
    }
  }
}

// GrantsNothing reports the types that reach nothing outside the sandbox.
bool GrantsNothing(absl::string_view type) {
  return type == kResources || type == kLifecycle || type == kSbx || type == kLongRunning ||
         type == kAgentContext || type == kAgentSkill || type == kAgentSessions ||
         type == kAgentInteractiveSessions;
}

// ServiceKey is the services entry of an other-typed request.
std::string ServiceKey(const CapabilityEntry& entry) {
  if (ConfigKey(entry).empty()) return entry.type;
  const std::string json = ToCanonicalJson(entry.config);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(json.data(), json.size(), md, &len, EVP_sha256(), nullptr) != 1 || len < 6) {
    // Fail safe: an unhashable config still reaches the gate, as itself.
    return absl::StrCat(entry.type, "+unencodable-config");
  }
  return absl::StrCat(entry.type, "+",
                      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(md), 6)));
}

struct SurfaceBuilder {
  NetworkBuilder install, runtime;
  std::map<std::string, CredentialSurface> cred_install, cred_runtime;
  StringSet storage, ports, services;
  bool privileged = false;

  void Add(const CapabilityEntry& e) {
    if (GrantsNothing(e.type)) return;
    if (e.type == kPrivileged) {
      privileged = true;
      return;
    }
    // Invariant: a well-known type whose typed config is missing (it did
    // not decode, or is still parameterized) falls through to `services`,
    // so a request the surface cannot read still gates on every change.
    if (const auto* net = e.As<NetworkPolicyConfig>(); net != nullptr) {
      for (Phase phase : {Phase::kInstall, Phase::kRuntime}) {
        const std::optional<NetworkRules>& rules = net->rules(phase);
        if (!rules) continue;
        NetworkBuilder& b = phase == Phase::kInstall ? install : runtime;
        AddEntries(rules->allow, &b.allow_hosts, &b.http_allow);
        AddEntries(rules->deny, &b.deny_hosts, &b.http_deny);
      }
      return;
    }
    if (const auto* cred = e.As<CredentialConfig>(); cred != nullptr) {
      for (Phase phase : cred->phases) {
        CredentialSurface& c =
            (phase == Phase::kInstall ? cred_install : cred_runtime)[cred->service];
        if (cred->api_key) {
          if (c.env_name.empty()) c.env_name = cred->api_key->name;
          StringSet domains(c.inject_domains.begin(), c.inject_domains.end());
          for (const InjectRule& r : cred->api_key->inject) domains.insert(r.domain);
          c.inject_domains = Sorted(domains);
        }
      }
      return;
    }
    if (const auto* vol = e.As<VolumeConfig>(); vol != nullptr) {
      storage.insert(vol->path);
      return;
    }
    if (const auto* port = e.As<PortConfig>(); port != nullptr) {
      ports.insert(port->Key());
      return;
    }
    services.insert(ServiceKey(e));
  }

  Surface Build() const {
    Surface s;
    s.install = install.Build();
    s.runtime = runtime.Build();
    s.credentials_install = cred_install;
    s.credentials_runtime = cred_runtime;
    s.storage_paths = Sorted(storage);
    s.ports = Sorted(ports);
    s.privileged = privileged;
    s.services = Sorted(services);
    return s;
  }
};

// ---- Containment ----

struct HostPort {
  absl::string_view name;
  absl::string_view port;  // "" when unqualified
};

HostPort SplitHost(absl::string_view host) {
  size_t colon = host.find(':');
  if (colon == absl::string_view::npos) return {host, ""};
  return {host.substr(0, colon), host.substr(colon + 1)};
}

bool IsEverything(absl::string_view name) { return name == "*" || name == "**"; }

// NameCovers reports whether every name `c` matches is one `g` matches.
// "*"/"**" match everything, "**.S" one or more labels before ".S",
// "*.S" exactly one label. Any other glob compares as a literal string,
// which can only over-report a widening.
bool NameCovers(absl::string_view g, absl::string_view c) {
  if (IsEverything(g) || g == c) return true;
  if (absl::StartsWith(g, "**.")) {
    absl::string_view suffix = g.substr(2);  // ".S"
    return c.size() > suffix.size() && absl::EndsWith(c, suffix);
  }
  if (absl::StartsWith(g, "*.")) {
    absl::string_view suffix = g.substr(1);
    if (c.size() <= suffix.size() || !absl::EndsWith(c, suffix)) return false;
    absl::string_view label = c.substr(0, c.size() - suffix.size());
    return !absl::StrContains(label, '.') && !absl::StrContains(label, "**");
  }
  return false;
}

bool HostCovers(absl::string_view g, absl::string_view c) {
  if (IsEverything(g)) return true;
  HostPort gh = SplitHost(g), ch = SplitHost(c);
  if (!gh.port.empty() && gh.port != ch.port) return false;
  return NameCovers(gh.name, ch.name);
}

// PathCovers: equal, or `g` is "<prefix>/**" and `c` is under that prefix
// (or is the prefix itself without its trailing slash).
bool PathCovers(absl::string_view g, absl::string_view c) {
  if (g == c) return true;
  if (!absl::EndsWith(g, "/**")) return false;
  absl::string_view prefix = g.substr(0, g.size() - 2);  // keeps the '/'
  return absl::StartsWith(c, prefix) || absl::StrCat(c, "/") == prefix;
}

struct Atom {
  absl::string_view method, host, path;
};

// ParseAtom splits "<METHOD> <host><path>" at the first space and then at
// the first '/'; with no '/', the path is "/".
Atom ParseAtom(absl::string_view atom) {
  Atom a;
  size_t space = atom.find(' ');
  a.method = atom.substr(0, space);
  absl::string_view rest = space == absl::string_view::npos ? "" : atom.substr(space + 1);
  size_t slash = rest.find('/');
  a.host = rest.substr(0, slash);
  a.path = slash == absl::string_view::npos ? absl::string_view("/") : rest.substr(slash);
  return a;
}

bool AtomCovers(absl::string_view g, absl::string_view c) {
  Atom ga = ParseAtom(g), ca = ParseAtom(c);
  return (ga.method == "ANY" || ga.method == ca.method) && HostCovers(ga.host, ca.host) &&
         PathCovers(ga.path, ca.path);
}

template <typename Pred>
bool AnyOf(const std::vector<std::string>& v, Pred pred) {
  return std::any_of(v.begin(), v.end(), pred);
}

// CoveredBy reports whether some pattern of `grants` (sorted, as every
// surface list is) covers `item`. Most items of an update are granted
// verbatim, so an exact match is looked up first.
bool HostCoveredBy(const std::vector<std::string>& grants, const std::string& item) {
  if (std::binary_search(grants.begin(), grants.end(), item)) return true;
  // Only a wildcard, or the same name without a port, covers another host;
  // wildcards start with '*', which sorts before every name character.
  std::string name(SplitHost(item).name);
  if (name != item && std::binary_search(grants.begin(), grants.end(), name)) return true;
  for (const std::string& g : grants) {
    if (g.empty() || g[0] != '*') break;
    if (HostCovers(g, item)) return true;
  }
  return false;
}
bool AtomCoveredBy(const std::vector<std::string>& grants, const std::string& item) {
  if (std::binary_search(grants.begin(), grants.end(), item)) return true;
  return AnyOf(grants, [&](const std::string& g) { return AtomCovers(g, item); });
}

// FromBareHost reports an atom that only spells out an unbounded host of
// `hosts` ("ANY h/**"); it is reported once, against the host list.
bool FromBareHost(const std::string& atom, const std::vector<std::string>& hosts) {
  Atom a = ParseAtom(atom);
  return a.method == "ANY" && a.path == "/**" &&
         std::binary_search(hosts.begin(), hosts.end(), a.host);
}

void DiffNetwork(const char* phase, const NetworkSurface& g, const NetworkSurface& p,
                 SurfaceDiff* out) {
  auto widen = [&](absl::string_view what) {
    out->widenings.push_back(absl::StrCat(phase, ": ", what));
  };
  auto narrow = [&](absl::string_view what) {
    out->narrowings.push_back(absl::StrCat(phase, ": ", what));
  };

  // Allows. A bounded atom on a host the proposal allows unbounded is
  // decided by that host: covered if the host is, else reported once there.
  for (const std::string& c : p.allow_hosts) {
    if (!HostCoveredBy(g.allow_hosts, c)) widen(absl::StrCat("new allow ", c));
  }
  for (const std::string& c : p.http_allow) {
    if (HostCoveredBy(p.allow_hosts, std::string(ParseAtom(c).host))) continue;
    if (!AtomCoveredBy(g.http_allow, c)) widen(absl::StrCat("new allow ", c));
  }
  for (const std::string& c : g.allow_hosts) {
    if (!HostCoveredBy(p.allow_hosts, c)) narrow(absl::StrCat("removed allow ", c));
  }
  for (const std::string& c : g.http_allow) {
    if (HostCoveredBy(g.allow_hosts, std::string(ParseAtom(c).host))) continue;
    if (!AtomCoveredBy(p.http_allow, c)) narrow(absl::StrCat("removed allow ", c));
  }

  // Denies. A granted deny the proposal no longer covers is a widening,
  // always: even where no kit allow reaches it, the global rules or a
  // later grant may, and the spec counts every removed deny.
  for (const std::string& d : g.deny_hosts) {
    if (!HostCoveredBy(p.deny_hosts, d)) widen(absl::StrCat("removed deny ", d));
  }
  for (const std::string& d : g.http_deny) {
    if (FromBareHost(d, g.deny_hosts) || AtomCoveredBy(p.http_deny, d)) continue;
    widen(absl::StrCat("removed deny ", d));
  }
  for (const std::string& d : p.deny_hosts) {
    if (!HostCoveredBy(g.deny_hosts, d)) narrow(absl::StrCat("new deny ", d));
  }
  for (const std::string& d : p.http_deny) {
    if (FromBareHost(d, p.deny_hosts) || AtomCoveredBy(g.http_deny, d)) continue;
    narrow(absl::StrCat("new deny ", d));
  }
}

std::vector<std::string> Minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

void DiffCredentials(const char* phase, const std::map<std::string, CredentialSurface>& g,
                     const std::map<std::string, CredentialSurface>& p, SurfaceDiff* out) {
  for (const auto& [service, cred] : p) {
    auto it = g.find(service);
    if (it == g.end()) {
      out->widenings.push_back(absl::StrCat("new credential ", service, " (", phase, ")"));
      continue;
    }
    for (const std::string& d : Minus(cred.inject_domains, it->second.inject_domains)) {
      out->widenings.push_back(
          absl::StrCat("credential ", service, " (", phase, "): new inject domain ", d));
    }
    for (const std::string& d : Minus(it->second.inject_domains, cred.inject_domains)) {
      out->narrowings.push_back(
          absl::StrCat("credential ", service, " (", phase, "): removed inject domain ", d));
    }
  }
  for (const auto& [service, cred] : g) {
    if (p.find(service) == p.end()) {
      out->narrowings.push_back(absl::StrCat("removed credential ", service, " (", phase, ")"));
    }
  }
}

void DiffSet(absl::string_view noun, const std::vector<std::string>& g,
             const std::vector<std::string>& p, SurfaceDiff* out) {
  for (const std::string& s : Minus(p, g))
    out->widenings.push_back(absl::StrCat("new ", noun, " ", s));
  for (const std::string& s : Minus(g, p)) {
    out->narrowings.push_back(absl::StrCat("removed ", noun, " ", s));
  }
}

// ShortType drops the spec's own namespace for display.
std::string ShortType(absl::string_view type) {
  absl::ConsumePrefix(&type, "com.docker.sandbox/");
  return std::string(type);
}

void DiffServices(const std::vector<std::string>& g, const std::vector<std::string>& p,
                  SurfaceDiff* out) {
  auto by_type = [](const std::vector<std::string>& keys) {
    std::map<std::string, std::vector<std::string>> m;
    for (const std::string& k : keys) m[k.substr(0, k.find('+'))].push_back(k);
    return m;
  };
  const auto gt = by_type(g);
  const auto pt = by_type(p);
  for (const auto& [type, keys] : pt) {
    auto it = gt.find(type);
    if (it == gt.end()) {
      for (size_t i = 0; i < keys.size(); ++i) {
        out->widenings.push_back(absl::StrCat("other: new ", ShortType(type)));
      }
      continue;
    }
    const std::vector<std::string> added = Minus(keys, it->second);
    for (size_t i = 0; i < added.size(); ++i) {
      out->widenings.push_back(absl::StrCat("other: changed ", ShortType(type), " config"));
    }
    if (added.empty()) {
      for (size_t i = 0; i < Minus(it->second, keys).size(); ++i) {
        out->narrowings.push_back(absl::StrCat("other: removed one ", ShortType(type)));
      }
    }
  }
  for (const auto& [type, keys] : gt) {
    if (pt.find(type) == pt.end()) {
      out->narrowings.push_back(absl::StrCat("other: removed ", ShortType(type)));
    }
  }
}

}  // namespace

Surface ProjectSurface(const Descriptor& effective) {
  SurfaceBuilder b;
  for (const CapabilityItem& item : effective.capabilities) {
    if (const auto* entry = std::get_if<CapabilityEntry>(&item); entry != nullptr) {
      b.Add(*entry);
    } else {
      for (const CapabilityEntry& member : std::get<CapabilityGroup>(item).members) b.Add(member);
    }
  }
  return b.Build();
}

SurfaceDiff Diff(const Surface& granted, const Surface& proposed) {
  SurfaceDiff out;
  // The lookups rely on sorted lists; a caller's hand-made surface may not be.
  auto sorted = [](NetworkSurface n) {
    for (auto* v : {&n.allow_hosts, &n.deny_hosts, &n.http_allow, &n.http_deny}) {
      std::sort(v->begin(), v->end());
    }
    return n;
  };
  DiffNetwork("install", sorted(granted.install), sorted(proposed.install), &out);
  DiffNetwork("runtime", sorted(granted.runtime), sorted(proposed.runtime), &out);
  DiffCredentials("install", granted.credentials_install, proposed.credentials_install, &out);
  DiffCredentials("runtime", granted.credentials_runtime, proposed.credentials_runtime, &out);
  DiffSet("volume", granted.storage_paths, proposed.storage_paths, &out);
  DiffSet("port", granted.ports, proposed.ports, &out);
  if (proposed.privileged && !granted.privileged) {
    out.widenings.push_back("privileged: now requested");
  } else if (granted.privileged && !proposed.privileged) {
    out.narrowings.push_back("privileged: no longer requested");
  }
  DiffServices(granted.services, proposed.services, &out);
  return out;
}

}  // namespace airlock::kit
