// Network rule parsing and the matcher built from it (common/policy). The
// input is lines: "allow|deny RESOURCE [METHODS] [/PATH...] [@SANDBOX]" is
// a rule, "? HOST-OR-IP [PORT [METHOD PATH]] [@SANDBOX]" a request. A rule
// that validates keeps its resource when its canonical text is parsed
// again, validates to the same rule when printed back as a spec, and
// survives the wire form (policy.v1.Rule) unchanged. The RuleSet of the
// valid rules decides every request, and every request derived from a
// rule (its own host, a name under it, a look-alike beside it, its
// address), exactly as a scan of every rule by the documented semantics
// would: it allows only what some allow rule's text covers and no deny
// rule's does, and reports inspect and path_rules when, and only when,
// a rule calls for them.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/policy/rule_wire.h"
#include "common/policy/rules.h"
#include "fuzz/fuzz_check.h"

namespace {

using airlock::policy::Action;
using airlock::policy::Decision;
using airlock::policy::Request;
using airlock::policy::Resource;
using airlock::policy::Rule;
using airlock::policy::RuleSet;
using airlock::policy::RuleSpec;

constexpr size_t kMaxRules = 32;
constexpr size_t kMaxRequests = 32;

bool SameResource(const Resource& a, const Resource& b) {
  return a.kind == b.kind && a.domain == b.domain && a.address == b.address &&
         a.prefix == b.prefix && a.port == b.port && a.text == b.text;
}

bool SameRule(const Rule& a, const Rule& b) {
  return a.action == b.action && SameResource(a.resource, b.resource) && a.methods == b.methods &&
         a.paths == b.paths && a.sandbox == b.sandbox && a.origin == b.origin;
}

// InPrefix compares the first `prefix` bits of two addresses.
bool InPrefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, int prefix) {
  for (int bit = 0; bit < prefix; ++bit) {
    uint8_t mask = 0x80 >> (bit % 8);
    if ((a[bit / 8] & mask) != (b[bit / 8] & mask)) return false;
  }
  return true;
}

// ResourceCovers is rules.h's resource semantics, written out without
// RuleSet's indexes: exact domain; "*.S" one label (the part before ".S"
// holds no dot); "**.S" any name ending in ".S"; an address within the
// prefix; "**" everything.
bool ResourceCovers(const Resource& r, const Request& req) {
  switch (r.kind) {
    case Resource::Kind::kAny:
      return true;
    case Resource::Kind::kDomain:
      return !req.host.empty() && req.host == r.domain;
    case Resource::Kind::kOneLabel: {
      std::string suffix = "." + r.domain;
      if (!absl::EndsWith(req.host, suffix)) return false;
      absl::string_view label(req.host.data(), req.host.size() - suffix.size());
      return label.find('.') == absl::string_view::npos;
    }
    case Resource::Kind::kAnyDepth:
      return absl::EndsWith(req.host, "." + r.domain);
    case Resource::Kind::kAddress:
      return req.has_address && InPrefix(r.address, req.address, r.prefix);
  }
  return false;
}

// Reaches: the rule is in the request's scope, on its port, for its host.
bool Reaches(const Rule& r, const Request& req) {
  if (!r.sandbox.empty() && r.sandbox != req.sandbox) return false;
  if (r.resource.port != 0 && req.port != 0 && r.resource.port != req.port) return false;
  return ResourceCovers(r.resource, req);
}

// Applies: it reaches the request and, for a method/path rule, the request
// is HTTP with one of its methods and a path one of its globs matches.
bool Applies(const Rule& r, const Request& req) {
  if (!Reaches(r, req)) return false;
  if (!r.http_only()) return true;
  if (!req.http) return false;
  if (!r.methods.empty() &&
      std::find(r.methods.begin(), r.methods.end(), req.method) == r.methods.end()) {
    return false;
  }
  if (r.paths.empty()) return true;
  return std::any_of(r.paths.begin(), r.paths.end(), [&](const std::string& g) {
    return airlock::policy::PathMatches(g, req.path);
  });
}

void CheckDecision(const RuleSet& set, const Request& req) {
  Decision d = set.Decide(req);
  bool allow = false, deny = false, http_rule = false, path_rule = false;
  for (const Rule& r : set.rules()) {
    if (Applies(r, req)) (r.action == Action::kAllow ? allow : deny) = true;
    if (Reaches(r, req)) {
      if (!r.paths.empty()) path_rule = true;
      if (r.http_only() && !req.http) http_rule = true;
    }
  }
  FUZZ_CHECK((d.action == Action::kAllow) == (allow && !deny));
  if (d.action == Action::kAllow) {
    FUZZ_CHECK(d.rule != nullptr && d.rule->action == Action::kAllow && Applies(*d.rule, req));
  }
  if (deny)
    FUZZ_CHECK(d.rule != nullptr && d.rule->action == Action::kDeny && Applies(*d.rule, req));
  FUZZ_CHECK(d.inspect == (!req.http && http_rule && !deny));
  FUZZ_CHECK(d.path_rules == path_rule);
}

// CheckRule holds a valid rule to its round trips.
void CheckRule(const RuleSpec& spec, const Rule& rule) {
  auto again = airlock::policy::ParseResource(rule.resource.text);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(SameResource(*again, rule.resource));

  RuleSpec printed;
  printed.action = rule.action;
  printed.resource = rule.resource.text;
  printed.methods = absl::StrJoin(rule.methods, ",");
  printed.paths = rule.paths;
  printed.sandbox = rule.sandbox;
  printed.origin = rule.origin;
  auto reparsed = airlock::policy::ValidateRule(printed);
  FUZZ_CHECK(reparsed.ok());
  FUZZ_CHECK(SameRule(*reparsed, rule));

  airlock::policy::v1::Rule wire;
  airlock::policy::RuleToProto(rule, &wire);
  auto from_wire = airlock::policy::RuleFromProto(wire);
  FUZZ_CHECK(from_wire.ok());
  FUZZ_CHECK(SameRule(*from_wire, rule));

  airlock::policy::v1::Rule spec_wire;
  airlock::policy::SpecToProto(spec, &spec_wire);
  auto from_spec_wire = airlock::policy::ValidateRule(airlock::policy::SpecFromProto(spec_wire));
  FUZZ_CHECK(from_spec_wire.ok());
  FUZZ_CHECK(SameRule(*from_spec_wire, rule));
}

// Derived requests probe a rule from inside and just outside: its own
// host, one and two labels under it, a look-alike that merely ends with
// its text, the parent of its suffix, and its address.
void AddDerived(const Rule& r, std::vector<Request>* out) {
  std::vector<std::string> hosts;
  if (!r.resource.domain.empty()) {
    const std::string& d = r.resource.domain;
    hosts = {d, "x." + d, "a.b." + d, "evil" + d, d.substr(d.find('.') + 1)};
  }
  for (bool http : {false, true}) {
    for (const std::string& h : hosts) {
      Request q;
      q.host = h;
      q.port = r.resource.port;
      q.sandbox = r.sandbox;
      q.http = http;
      q.method = r.methods.empty() ? "GET" : r.methods[0];
      q.path = r.paths.empty() ? "/" : r.paths[0];
      out->push_back(q);
    }
    if (r.resource.kind == Resource::Kind::kAddress) {
      Request q;
      q.has_address = true;
      q.address = r.resource.address;
      q.port = r.resource.port == 0 ? 443 : r.resource.port;
      q.http = http;
      q.method = "GET";
      q.path = "/";
      out->push_back(q);
      q.address[15] ^= 1;
      out->push_back(q);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<Rule> rules;
  std::vector<Request> requests;
  for (absl::string_view line : absl::StrSplit(input, '\n')) {
    // The whole line as one resource: whatever it is, a resource that
    // parses keeps its fields when its canonical text is parsed again.
    if (auto whole = airlock::policy::ParseResource(line); whole.ok()) {
      auto again = airlock::policy::ParseResource(whole->text);
      FUZZ_CHECK(again.ok() && SameResource(*again, *whole));
    }
    std::vector<std::string> tok = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (tok.size() < 2) continue;
    std::string sandbox;
    for (const std::string& t : tok) {
      if (t.size() > 1 && t[0] == '@') sandbox = t.substr(1);
    }
    if ((tok[0] == "allow" || tok[0] == "deny") && rules.size() < kMaxRules) {
      RuleSpec spec;
      spec.action = tok[0] == "allow" ? Action::kAllow : Action::kDeny;
      spec.resource = tok[1];
      std::vector<std::string> methods;
      for (size_t i = 2; i < tok.size(); ++i) {
        if (tok[i][0] == '/') {
          spec.paths.push_back(tok[i]);
        } else if (tok[i][0] != '@') {
          methods.push_back(tok[i]);
        }
      }
      spec.methods = absl::StrJoin(methods, ",");
      spec.sandbox = sandbox;
      auto rule = airlock::policy::ValidateRule(spec);
      if (!rule.ok()) continue;
      CheckRule(spec, *rule);
      rules.push_back(*rule);
    } else if (tok[0] == "?" && requests.size() < kMaxRequests) {
      Request q;
      q.host = absl::AsciiStrToLower(tok[1]);
      if (airlock::policy::ParseAddress(tok[1], &q.address)) {
        q.has_address = true;
        q.host.clear();
      }
      uint32_t port = 0;
      if (tok.size() > 2 && absl::SimpleAtoi(tok[2], &port) && port <= 65535) q.port = port;
      if (tok.size() > 4 && tok[3][0] != '@') {
        q.http = true;
        q.method = tok[3];
        q.path = tok[4];
      }
      q.sandbox = sandbox;
      requests.push_back(q);
    }
  }
  for (const Rule& r : rules) AddDerived(r, &requests);
  RuleSet set(rules);
  for (const Request& q : requests) CheckDecision(set, q);
  return 0;
}
