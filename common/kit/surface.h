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
  std::vector<std::string> storage_paths;  // volume@1 paths, verbatim
  std::vector<std::string> ports;          // "<container>/<tcp|udp>"
  bool privileged = false;
  // Every other request that reaches anything: the type alone when the
  // config is absent or empty, else "type+<12 hex of SHA-256 of the
  // canonical JSON config>". Unknown types, config-less grants
  // (git-identity@1, kit-registry@1), types this surface has no finer
  // model for (ssh-agent@1, usb-device@1, host-mount@1, agent-skills@1,
  // acp@1) and well-known entries whose config did not decode land here,
  // so nothing escapes the gate: any config change on them is a widening.
  std::vector<std::string> services;
};

// ProjectSurface projects the effective (expanded, selected, composed)
// descriptor onto its grant surface. Types that grant nothing
// (resources@1, lifecycle@1, sbx@1, long-running@1, agent-context@1,
// agent-skill@1, agent-sessions@1, agent-interactive-sessions@1)
// contribute nothing; `optional` and `name` do not change the surface.
// A group still present (an unselected declaration) contributes all of
// its members, conservatively.
Surface ProjectSurface(const Descriptor& effective);

// SurfaceDiff is what changed between a granted and a proposed surface,
// as one human-readable line per item, e.g.
// "runtime: new allow api.example.com" or "new port 8080/tcp".
struct SurfaceDiff {
  // Grants the proposed surface adds. Any widening MUST stop for approval.
  std::vector<std::string> widenings;
  // Grants it drops (a removed allow, a new deny). These apply silently;
  // they are listed for the log.
  std::vector<std::string> narrowings;
  bool widens() const { return !widenings.empty(); }
};

// Diff compares `proposed` against `granted`, aware of containment:
//  - hosts: "*" and "**" cover every host; "**.example.com" covers any
//    deeper name under example.com, "*.example.com" exactly one label; an
//    unqualified host covers every port of it, "h:443" only port 443;
//  - methods: ANY covers every method, and only ANY covers ANY;
//  - paths: "/x/**" covers "/x", "/x/y", "/x/**" and "/x/**/z"; nothing
//    subtler ("/x/*" covers only "/x/*");
//  - a host-wide allow covers every HTTP atom on that host.
// A new allow that a granted one covers is not a widening. A granted deny
// the proposed denies no longer cover is always a widening (the global
// rules may allow what it refused). Credentials: a new service in a phase or
// a new inject domain widens. Storage, ports: a new item widens.
// Privileged: only false -> true widens. Other services: a new type, or a
// changed config of one (its digest changes), widens.
SurfaceDiff Diff(const Surface& granted, const Surface& proposed);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_SURFACE_H_
