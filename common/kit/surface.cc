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
// dev.airlock/agent@1 only names what runs inside it: a changed command or
// image is neither a widening nor a narrowing.
bool GrantsNothing(absl::string_view type) {
  return type == kResources || type == kLifecycle || type == kSbx || type == kLongRunning ||
         type == kAgentContext || type == kAgentSkill || type == kAgentSessions ||
         type == kAgentInteractiveSessions || type == kAirlockAgent;
}

// IsSurfaceTyped reports the types that have typed lists beside their
// services key.
bool IsSurfaceTyped(absl::string_view type) {
  return type == kSshAgent || type == kUsbDevice || type == kHostMount || type == kAgentSkills;
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

// ---- The well-known types this library reads only for the surface ----
//
// Their configs are checked for known keys but not typed (capabilities.h),
// so each reader here takes only the shape the spec states and returns
// false otherwise: the entry then reaches the gate by its services key
// alone.

// Text reads a scalar config value by its spelling.
bool Text(const Value* v, std::string* out) {
  if (v == nullptr || !v->is_scalar()) return false;
  *out = v->text;
  return true;
}

// Texts reads a list of scalars.
bool Texts(const Value* v, std::vector<std::string>* out) {
  if (v == nullptr || !v->is_list()) return false;
  for (const Value& item : v->items) {
    std::string s;
    if (!Text(&item, &s)) return false;
    out->push_back(std::move(s));
  }
  return true;
}

// SshAgentAtoms: one atom per phase when unrestricted (the default, and
// the wider reading of a config stating both), else one per sign
// namespace and authenticate destination.
bool SshAgentAtoms(const Value& config, StringSet* out) {
  std::vector<std::string> phases, sign, authenticate;
  const Value* phase = config.Find("phase");
  std::string one;
  if (Text(phase, &one)) {
    phases.push_back(one);
  } else if (!Texts(phase, &phases)) {
    return false;
  }
  if (phases.empty()) return false;
  for (const std::string& p : phases) {
    if (p != "install" && p != "runtime") return false;
  }
  bool unrestricted = true;
  if (const Value* u = config.Find("unrestricted")) {
    if (u->kind != Value::Kind::kBool) return false;
    unrestricted = u->bool_value;
  }
  if (const Value* v = config.Find("sign"); v != nullptr && !Texts(v, &sign)) return false;
  if (const Value* v = config.Find("authenticate"); v != nullptr && !Texts(v, &authenticate)) {
    return false;
  }
  if (!unrestricted && sign.empty() && authenticate.empty()) return false;
  for (const std::string& p : phases) {
    if (unrestricted) {
      out->insert(p);
      continue;
    }
    for (const std::string& ns : sign) out->insert(absl::StrCat(p, " sign ", ns));
    for (const std::string& d : authenticate) out->insert(absl::StrCat(p, " authenticate ", d));
  }
  return true;
}

// UsbAtom: "<vendorId>:<productId>" or "class:<class>", exactly one form.
bool UsbAtom(const Value& config, std::string* out) {
  std::string vendor, product, klass;
  bool has_vendor = Text(config.Find("vendorId"), &vendor) && !vendor.empty();
  bool has_product = Text(config.Find("productId"), &product) && !product.empty();
  bool has_class = Text(config.Find("class"), &klass) && !klass.empty();
  if (has_class && !has_vendor && !has_product) {
    *out = "class:" + klass;
    return true;
  }
  if (has_vendor && has_product && !has_class) {
    *out = absl::StrCat(vendor, ":", product);
    return true;
  }
  return false;
}

// ConfigPath reads the required `path` of host-mount@1 and agent-skills@1.
bool ConfigPath(const Value& config, std::string* out) {
  return Text(config.Find("path"), out) && !out->empty();
}

struct SurfaceBuilder {
  NetworkBuilder install, runtime;
  std::map<std::string, CredentialSurface> cred_install, cred_runtime;
  StringSet ssh_agent, storage, host_mounts, skills, skills_write, ports, usb, services,
      typed_services;
  bool privileged = false;

  // AddTyped projects the types this surface reads from the raw config;
  // false leaves the entry to its services key alone.
  bool AddTyped(const CapabilityEntry& e) {
    if (e.parameterized || !e.config.is_map()) return false;
    const Value& c = e.config;
    if (e.type == kSshAgent) return SshAgentAtoms(c, &ssh_agent);
    std::string s;
    if (e.type == kUsbDevice) {
      if (!UsbAtom(c, &s)) return false;
      usb.insert(s);
      return true;
    }
    if (!ConfigPath(c, &s)) return false;
    if (e.type == kHostMount) {
      host_mounts.insert(s);
      return true;
    }
    // agent-skills@1: readonly unless it asks for readwrite.
    std::string mode;
    if (const Value* m = c.Find("mode"); m != nullptr && !Text(m, &mode)) return false;
    if (mode.empty()) mode = "readonly";
    if (mode != "readonly" && mode != "readwrite") return false;
    skills.insert(s);
    if (mode == "readwrite") skills_write.insert(s);
    return true;
  }

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
    const std::string key = ServiceKey(e);
    services.insert(key);
    if (IsSurfaceTyped(e.type) && AddTyped(e)) typed_services.insert(key);
  }

  Surface Build() const {
    Surface s;
    s.install = install.Build();
    s.runtime = runtime.Build();
    s.credentials_install = cred_install;
    s.credentials_runtime = cred_runtime;
    s.ssh_agent = Sorted(ssh_agent);
    s.storage_paths = Sorted(storage);
    s.host_mount_paths = Sorted(host_mounts);
    s.skills_paths = Sorted(skills);
    s.skills_write_paths = Sorted(skills_write);
    s.ports = Sorted(ports);
    s.usb = Sorted(usb);
    s.privileged = privileged;
    s.services = Sorted(services);
    s.typed_services = Sorted(typed_services);
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
  // wildcards start with '*', so they are the sorted run from "*" on (hosts
  // are verbatim: some may sort before it).
  std::string name(SplitHost(item).name);
  if (name != item && std::binary_search(grants.begin(), grants.end(), name)) return true;
  for (auto g = std::lower_bound(grants.begin(), grants.end(), "*");
       g != grants.end() && (*g)[0] == '*'; ++g) {
    if (HostCovers(*g, item)) return true;
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

// ---- Recording ----

void Widen(SurfaceDiff* out, std::string category, std::string phase, std::string detail) {
  out->widenings.push_back(detail);
  out->widened.push_back({std::move(category), std::move(phase), std::move(detail)});
}
void Narrow(SurfaceDiff* out, std::string category, std::string phase, std::string detail) {
  out->narrowings.push_back(detail);
  out->narrowed.push_back({std::move(category), std::move(phase), std::move(detail)});
}

std::string AtomHost(const std::string& atom) { return std::string(ParseAtom(atom).host); }

// ---- Network ----

void DiffNetwork(const char* phase, const NetworkSurface& g, const NetworkSurface& p,
                 SurfaceDiff* out) {
  const std::string net = absl::StrCat("network.", phase, ".");
  auto widen = [&](absl::string_view field, absl::string_view what) {
    Widen(out, absl::StrCat(net, field), phase, absl::StrCat(phase, ": ", what));
  };
  auto narrow = [&](absl::string_view field, absl::string_view what) {
    Narrow(out, absl::StrCat(net, field), phase, absl::StrCat(phase, ": ", what));
  };

  // Allows. A bare allow of a host is every request to it, so it covers
  // every bounded allow there, listed as HTTP atoms or not (a grant stored
  // before they were has none). An atom on a host the proposal allows bare
  // is decided by that host: covered if the host is, else reported once,
  // against the host list.
  for (const std::string& c : p.allow_hosts) {
    if (!HostCoveredBy(g.allow_hosts, c)) widen("allow", absl::StrCat("new allow ", c));
  }
  for (const std::string& c : p.http_allow) {
    const std::string host = AtomHost(c);
    if (HostCoveredBy(p.allow_hosts, host)) continue;
    if (HostCoveredBy(g.allow_hosts, host) || AtomCoveredBy(g.http_allow, c)) continue;
    widen("http.allow", absl::StrCat("new allow ", c));
  }
  for (const std::string& c : g.allow_hosts) {
    if (!HostCoveredBy(p.allow_hosts, c)) narrow("allow", absl::StrCat("removed allow ", c));
  }
  for (const std::string& c : g.http_allow) {
    const std::string host = AtomHost(c);
    if (HostCoveredBy(g.allow_hosts, host)) continue;
    if (HostCoveredBy(p.allow_hosts, host) || AtomCoveredBy(p.http_allow, c)) continue;
    narrow("http.allow", absl::StrCat("removed allow ", c));
  }

  // Denies. A granted deny the proposal no longer covers is a widening,
  // always: even where no kit allow reaches it, the global rules or a
  // later grant may, and the spec counts every removed deny. A bare deny
  // refuses every request to its host, so it covers every bounded deny
  // there; the atom a bare deny projects is reported with its host.
  for (const std::string& d : g.deny_hosts) {
    if (!HostCoveredBy(p.deny_hosts, d)) widen("deny-removed", absl::StrCat("removed deny ", d));
  }
  for (const std::string& d : g.http_deny) {
    if (FromBareHost(d, g.deny_hosts)) continue;
    if (HostCoveredBy(p.deny_hosts, AtomHost(d)) || AtomCoveredBy(p.http_deny, d)) continue;
    widen("http.deny-removed", absl::StrCat("removed deny ", d));
  }
  for (const std::string& d : p.deny_hosts) {
    if (!HostCoveredBy(g.deny_hosts, d)) narrow("deny", absl::StrCat("new deny ", d));
  }
  for (const std::string& d : p.http_deny) {
    if (FromBareHost(d, p.deny_hosts)) continue;
    if (HostCoveredBy(g.deny_hosts, AtomHost(d)) || AtomCoveredBy(g.http_deny, d)) continue;
    narrow("http.deny", absl::StrCat("new deny ", d));
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
  const std::string category = absl::StrCat("credentials.", phase);
  for (const auto& [service, cred] : p) {
    auto it = g.find(service);
    if (it == g.end()) {
      Widen(out, category, phase, absl::StrCat("new credential ", service, " (", phase, ")"));
      continue;
    }
    for (const std::string& d : Minus(cred.inject_domains, it->second.inject_domains)) {
      Widen(out, category, phase,
            absl::StrCat("credential ", service, " (", phase, "): new inject domain ", d));
    }
    for (const std::string& d : Minus(it->second.inject_domains, cred.inject_domains)) {
      Narrow(out, category, phase,
             absl::StrCat("credential ", service, " (", phase, "): removed inject domain ", d));
    }
  }
  for (const auto& [service, cred] : g) {
    if (p.find(service) == p.end()) {
      Narrow(out, category, phase, absl::StrCat("removed credential ", service, " (", phase, ")"));
    }
  }
}

// ---- ssh-agent ----

// SshCovers: the same atom; the unrestricted phase; or, for
// "authenticate user@host", "authenticate host".
bool SshCovers(const std::vector<std::string>& grants, const std::string& atom) {
  auto has = [&](const std::string& a) {
    return std::binary_search(grants.begin(), grants.end(), a);
  };
  if (has(atom)) return true;
  absl::string_view phase = absl::string_view(atom).substr(0, atom.find(' '));
  if (phase.size() == atom.size()) return false;  // an unrestricted phase, not granted
  if (has(std::string(phase))) return true;
  const std::string authenticate = absl::StrCat(phase, " authenticate ");
  if (!absl::StartsWith(atom, authenticate)) return false;
  size_t at = atom.find('@', authenticate.size());
  return at != std::string::npos && has(authenticate + atom.substr(at + 1));
}

// SshText says what an atom grants, after its phase.
std::string SshText(const std::string& atom) {
  size_t space = atom.find(' ');
  return space == std::string::npos ? "unrestricted" : atom.substr(space + 1);
}

void DiffSshAgent(const std::vector<std::string>& g, const std::vector<std::string>& p,
                  SurfaceDiff* out) {
  auto phase = [](const std::string& atom) { return atom.substr(0, atom.find(' ')); };
  for (const std::string& a : p) {
    if (SshCovers(g, a)) continue;
    Widen(out, "ssh-agent", phase(a),
          absl::StrCat("ssh-agent (", phase(a), "): new grant ", SshText(a)));
  }
  for (const std::string& a : g) {
    if (SshCovers(p, a)) continue;
    Narrow(out, "ssh-agent", phase(a),
           absl::StrCat("ssh-agent (", phase(a), "): removed grant ", SshText(a)));
  }
}

// ---- Sets of items ----

void DiffSet(absl::string_view category, absl::string_view noun, const std::vector<std::string>& g,
             const std::vector<std::string>& p, SurfaceDiff* out) {
  for (const std::string& s : Minus(p, g)) {
    Widen(out, std::string(category), "", absl::StrCat("new ", noun, " ", s));
  }
  for (const std::string& s : Minus(g, p)) {
    Narrow(out, std::string(category), "", absl::StrCat("removed ", noun, " ", s));
  }
}

void DiffSkillsWrite(const std::vector<std::string>& g, const std::vector<std::string>& p,
                     SurfaceDiff* out) {
  for (const std::string& s : Minus(p, g)) {
    Widen(out, "skills.write", "", absl::StrCat("skills store ", s, ": now writable"));
  }
  for (const std::string& s : Minus(g, p)) {
    Narrow(out, "skills.write", "", absl::StrCat("skills store ", s, ": no longer writable"));
  }
}

// ---- Other services ----

// ShortType drops the spec's own namespace for display.
std::string ShortType(absl::string_view type) {
  absl::ConsumePrefix(&type, "com.docker.sandbox/");
  return std::string(type);
}

std::string KeyType(const std::string& key) { return key.substr(0, key.find('+')); }

void DiffServices(const std::vector<std::string>& g, const std::vector<std::string>& p,
                  SurfaceDiff* out) {
  auto by_type = [](const std::vector<std::string>& keys) {
    std::map<std::string, std::vector<std::string>> m;
    for (const std::string& k : keys) m[KeyType(k)].push_back(k);
    return m;
  };
  const auto gt = by_type(g);
  const auto pt = by_type(p);
  for (const auto& [type, keys] : pt) {
    auto it = gt.find(type);
    if (it == gt.end()) {
      for (size_t i = 0; i < keys.size(); ++i) {
        Widen(out, "services", "", absl::StrCat("other: new ", ShortType(type)));
      }
      continue;
    }
    const std::vector<std::string> added = Minus(keys, it->second);
    for (size_t i = 0; i < added.size(); ++i) {
      Widen(out, "services", "", absl::StrCat("other: changed ", ShortType(type), " config"));
    }
    if (added.empty()) {
      for (size_t i = 0; i < Minus(it->second, keys).size(); ++i) {
        Narrow(out, "services", "", absl::StrCat("other: removed one ", ShortType(type)));
      }
    }
  }
  for (const auto& [type, keys] : gt) {
    if (pt.find(type) == pt.end()) {
      Narrow(out, "services", "", absl::StrCat("other: removed ", ShortType(type)));
    }
  }
}

// Sorted copies a list sorted: the lookups rely on it, and a caller's
// hand-made surface may not be.
std::vector<std::string> SortedCopy(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// TypedJudged reports whether both surfaces account for every services key
// of `type` in their typed lists, so those lists can judge it.
bool TypedJudged(absl::string_view type, const Surface& a, const Surface& b) {
  for (const Surface* s : {&a, &b}) {
    const std::vector<std::string> typed = SortedCopy(s->typed_services);
    for (const std::string& key : s->services) {
      if (KeyType(key) == type && !std::binary_search(typed.begin(), typed.end(), key)) {
        return false;
      }
    }
  }
  return true;
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

std::vector<std::string> Surface::OtherServices() const {
  return Minus(SortedCopy(services), SortedCopy(typed_services));
}

SurfaceDiff Diff(const Surface& granted, const Surface& proposed) {
  SurfaceDiff out;
  auto sorted = [](NetworkSurface n) {
    for (auto* v : {&n.allow_hosts, &n.deny_hosts, &n.http_allow, &n.http_deny}) {
      std::sort(v->begin(), v->end());
    }
    return n;
  };
  const Surface& g = granted;
  const Surface& p = proposed;
  DiffNetwork("install", sorted(g.install), sorted(p.install), &out);
  DiffNetwork("runtime", sorted(g.runtime), sorted(p.runtime), &out);
  DiffCredentials("install", g.credentials_install, p.credentials_install, &out);
  DiffCredentials("runtime", g.credentials_runtime, p.credentials_runtime, &out);

  // A type with typed lists is judged by them when both surfaces have
  // them for all of its entries, else by its services keys as before.
  std::set<std::string> by_key;
  for (absl::string_view type : {kSshAgent, kHostMount, kAgentSkills, kUsbDevice}) {
    if (!TypedJudged(type, g, p)) by_key.insert(std::string(type));
  }
  auto typed = [&](absl::string_view type) { return by_key.count(std::string(type)) == 0; };
  if (typed(kSshAgent)) DiffSshAgent(SortedCopy(g.ssh_agent), SortedCopy(p.ssh_agent), &out);
  DiffSet("storage", "volume", SortedCopy(g.storage_paths), SortedCopy(p.storage_paths), &out);
  if (typed(kHostMount)) {
    DiffSet("host-mount", "host mount", SortedCopy(g.host_mount_paths),
            SortedCopy(p.host_mount_paths), &out);
  }
  if (typed(kAgentSkills)) {
    DiffSet("skills", "skills store", SortedCopy(g.skills_paths), SortedCopy(p.skills_paths), &out);
    DiffSkillsWrite(SortedCopy(g.skills_write_paths), SortedCopy(p.skills_write_paths), &out);
  }
  DiffSet("ports", "port", SortedCopy(g.ports), SortedCopy(p.ports), &out);
  if (typed(kUsbDevice)) DiffSet("usb", "USB device", SortedCopy(g.usb), SortedCopy(p.usb), &out);
  if (p.privileged && !g.privileged) {
    Widen(&out, "privileged", "", "privileged: now requested");
  } else if (g.privileged && !p.privileged) {
    Narrow(&out, "privileged", "", "privileged: no longer requested");
  }
  auto judged_by_key = [&](const Surface& s) {
    std::vector<std::string> keys;
    for (const std::string& k : s.services) {
      if (!IsSurfaceTyped(KeyType(k)) || by_key.count(KeyType(k)) > 0) keys.push_back(k);
    }
    return SortedCopy(std::move(keys));
  };
  DiffServices(judged_by_key(g), judged_by_key(p), &out);
  return out;
}

}  // namespace airlock::kit
