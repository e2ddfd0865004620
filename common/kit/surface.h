// The permission ("grant") surface of an effective descriptor and the
// widening gate over it (kit-spec-notes §7): what a Kit is allowed to
// reach, normalized so two surfaces compare item by item, and the diff
// that says which changes of an update grant more (and must stop for
// approval) and which grant less (and may apply silently).
#ifndef AIRLOCK_COMMON_KIT_SURFACE_H_
#define AIRLOCK_COMMON_KIT_SURFACE_H_

#include <map>
#include <string>
#include <vector>

#include "common/kit/descriptor.h"

namespace airlock::kit {

// NetworkSurface is one phase's network grants. Every list is sorted
// byte-wise and deduplicated.
struct NetworkSurface {
  // Hosts of the unbounded allow / deny entries, verbatim with any ":port".
  std::vector<std::string> allow_hosts;
  std::vector<std::string> deny_hosts;
  // HTTP atoms "<METHOD> <host><path>" of every allow / deny entry,
  // bounded or not: a missing method list is ANY, a missing path list is
  // "/**", so an unbounded host h also appears as "ANY h/**".
  std::vector<std::string> http_allow;
  std::vector<std::string> http_deny;
};

// CredentialSurface is one credential@1 service as one phase sees it.
struct CredentialSurface {
  std::string env_name;                     // apiKey.name; "" when inject-only or OAuth
  std::vector<std::string> inject_domains;  // apiKey.inject[].domain, sorted
};

// Surface is the normalized grant surface of one effective descriptor.
struct Surface {
  NetworkSurface install;
  NetworkSurface runtime;
  // Keyed by credential service.
  std::map<std::string, CredentialSurface> credentials_install;
  std::map<std::string, CredentialSurface> credentials_runtime;
  // ssh-agent@1 grants: "<phase>" for an unrestricted entry, "<phase> sign
  // <namespace>" and "<phase> authenticate <[user@]host>" for a bounded one.
  std::vector<std::string> ssh_agent;
  std::vector<std::string> storage_paths;       // volume@1 paths, verbatim
  std::vector<std::string> host_mount_paths;    // host-mount@1 paths, verbatim
  std::vector<std::string> skills_paths;        // agent-skills@1 paths
  std::vector<std::string> skills_write_paths;  // those of them with mode: readwrite
  std::vector<std::string> ports;               // "<container>/<tcp|udp>"
  std::vector<std::string> usb;                 // "<vendorId>:<productId>" or "class:<class>"
  bool privileged = false;
  // Every other request that reaches anything: the type alone when the
  // config is absent or empty, else "type+<12 hex of SHA-256 of the
  // canonical JSON config>". Unknown types, config-less grants
  // (git-identity@1, kit-registry@1), types this surface has no finer
  // model for (acp@1) and well-known entries whose config did not decode
  // land here, so nothing escapes the gate: any config change on them is a
  // widening.
  //
  // Invariant: the ssh-agent@1, host-mount@1, agent-skills@1 and
  // usb-device@1 entries are keyed here too, beside their typed lists, so
  // a store that keeps only the fields above it had before those lists
  // existed (policyd's GrantSurface) still gates every change of them.
  std::vector<std::string> services;
  // The keys of `services` the typed lists spell out. Diff judges a type
  // by its typed lists only when both surfaces account for all of its keys
  // here, and by its keys otherwise (a stored surface has none of this).
  std::vector<std::string> typed_services;

  // OtherServices is `services` less `typed_services`: the requests no
  // typed list spells out, which is what a person reading the surface is
  // shown as "services".
  std::vector<std::string> OtherServices() const;
};

// ProjectSurface projects the effective (expanded, selected, composed)
// descriptor onto its grant surface. Types that grant nothing
// (resources@1, lifecycle@1, sbx@1, long-running@1, agent-context@1,
// agent-skill@1, agent-sessions@1, agent-interactive-sessions@1,
// dev.airlock/agent@1) contribute nothing; `optional` and `name` do not change the surface.
// A group still present (an unselected declaration) contributes all of
// its members, conservatively.
Surface ProjectSurface(const Descriptor& effective);

// SurfaceChange is one grant a diff found added or dropped.
struct SurfaceChange {
  // The permission class, named after the spec's surface fields:
  // "network.<phase>.allow", "network.<phase>.http.allow",
  // "network.<phase>.deny-removed", "network.<phase>.http.deny-removed",
  // "credentials.<phase>", "ssh-agent", "storage", "host-mount", "skills",
  // "skills.write", "ports", "usb", "privileged", "services". A narrowing
  // that adds a deny is "network.<phase>.deny" or
  // "network.<phase>.http.deny"; every other narrowing takes the category
  // of the widening it undoes.
  std::string category;
  // "install" or "runtime" for the phased grants (network, credentials,
  // ssh-agent); "" for the rest.
  std::string phase;
  // The change as one human-readable line, e.g. "runtime: new allow
  // api.example.com" or "new port 8080/tcp".
  std::string detail;
};

// SurfaceDiff is what changed between a granted and a proposed surface.
struct SurfaceDiff {
  // Grants the proposed surface adds. Any widening MUST stop for approval.
  std::vector<SurfaceChange> widened;
  // Grants it drops (a removed allow, a new deny). These apply silently;
  // they are listed for the log.
  std::vector<SurfaceChange> narrowed;
  // The details of `widened` and `narrowed`, in the same order: the lines
  // the gate records and shows (its protos carry strings).
  std::vector<std::string> widenings;
  std::vector<std::string> narrowings;
  bool widens() const { return !widened.empty(); }
};

// Diff compares `proposed` against `granted`, aware of containment:
//  - hosts: "*" and "**" cover every host; "**.example.com" covers any
//    deeper name under example.com, "*.example.com" exactly one label (the
//    matcher is the runtime's, and these are policyd's); an unqualified
//    host covers every port of it, "h:443" only port 443;
//  - methods: ANY covers every method, and only ANY covers ANY;
//  - paths: "/x/**" covers "/x", "/x/y", "/x/**" and "/x/**/z"; nothing
//    subtler ("/x/*" covers only "/x/*");
//  - a bare (unbounded) allow of a host covers every method/path-bounded
//    allow on it, and a bare deny every bounded deny, whether or not the
//    surface lists the HTTP atoms; a bare allow where only bounded ones
//    were is a widening, reported once against the host list.
// A new allow that a granted one covers is not a widening. A granted deny
// the proposed denies no longer cover is always a widening (the global
// rules may allow what it refused), bounded or bare. Credentials: a new
// service in a phase or a new inject domain widens. ssh-agent: an
// unrestricted phase covers everything in it, and "authenticate host"
// covers "authenticate user@host". Storage, host mounts, skills stores,
// ports, USB devices: a new item widens, and so does a skills store
// becoming writable. Privileged: only false -> true widens. Other
// services: a new type, or a changed config of one (its digest changes),
// widens.
SurfaceDiff Diff(const Surface& granted, const Surface& proposed);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_SURFACE_H_
