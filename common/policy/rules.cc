#include "common/policy/rules.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace airlock::policy {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid resource \"", text, "\": ", why));
}

// ValidDomain checks labels of letters, digits and '-', not at either end.
bool ValidDomain(absl::string_view d) {
  if (d.empty() || d.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(d, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
    }
  }
  return true;
}

std::string Masked(const std::array<uint8_t, 16>& a, int prefix) {
  std::string out(reinterpret_cast<const char*>(a.data()), 16);
  for (int bit = prefix; bit < 128; ++bit) out[bit / 8] &= ~(0x80 >> (bit % 8));
  return out;
}

}  // namespace

bool ParseAddress(absl::string_view text, std::array<uint8_t, 16>* out) {
  std::string t(text);
  in_addr a4;
  if (inet_pton(AF_INET, t.c_str(), &a4) == 1) {
    out->fill(0);
    (*out)[10] = 0xff;
    (*out)[11] = 0xff;
    memcpy(out->data() + 12, &a4, 4);
    return true;
  }
  in6_addr a6;
  if (inet_pton(AF_INET6, t.c_str(), &a6) == 1) {
    memcpy(out->data(), &a6, 16);
    return true;
  }
  return false;
}

absl::StatusOr<Resource> ParseResource(absl::string_view raw) {
  std::string text = absl::AsciiStrToLower(absl::StripAsciiWhitespace(raw));
  Resource r;
  if (text.empty()) return Bad(raw, "empty");
  // Split off a port: "[v6]:port", "host:port" (one colon only), never a
  // bare IPv6 address.
  std::string host = text;
  if (text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return Bad(raw, "missing ']'");
    host = text.substr(1, close - 1);
    std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      uint32_t port;
      if (rest[0] != ':' || !absl::SimpleAtoi(rest.substr(1), &port) || port == 0 || port > 65535) {
        return Bad(raw, "the port must be 1..65535");
      }
      r.port = port;
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    size_t colon = text.find(':');
    uint32_t port;
    if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port == 0 || port > 65535) {
      return Bad(raw, "the port must be 1..65535");
    }
    r.port = port;
    host = text.substr(0, colon);
  }
  if (host == "**") {
    r.kind = Resource::Kind::kAny;
  } else if (absl::StartsWith(host, "**.")) {
    r.kind = Resource::Kind::kAnyDepth;
    r.domain = host.substr(3);
  } else if (absl::StartsWith(host, "*.")) {
    r.kind = Resource::Kind::kOneLabel;
    r.domain = host.substr(2);
  } else if (host.find('/') != std::string::npos) {
    size_t slash = host.find('/');
    int prefix;
    if (!ParseAddress(host.substr(0, slash), &r.address) ||
        !absl::SimpleAtoi(host.substr(slash + 1), &prefix)) {
      return Bad(raw, "a CIDR is ADDRESS/PREFIX");
    }
    bool v4 = host.find(':') == std::string::npos;
    if (prefix < 0 || prefix > (v4 ? 32 : 128)) {
      return Bad(raw, v4 ? "an IPv4 prefix is 0..32" : "an IPv6 prefix is 0..128");
    }
    r.kind = Resource::Kind::kAddress;
    r.prefix = v4 ? prefix + 96 : prefix;
    std::string masked = Masked(r.address, r.prefix);
    std::copy(masked.begin(), masked.end(), r.address.begin());
  } else if (ParseAddress(host, &r.address)) {
    r.kind = Resource::Kind::kAddress;
    r.prefix = 128;
  } else {
    if (host.find('*') != std::string::npos) {
      return Bad(raw, "a wildcard may only be the first label, as *.example.com or **.example.com");
    }
    r.kind = Resource::Kind::kDomain;
    r.domain = host;
  }
  if ((r.kind == Resource::Kind::kDomain || r.kind == Resource::Kind::kOneLabel ||
       r.kind == Resource::Kind::kAnyDepth) &&
      !ValidDomain(r.domain)) {
    return Bad(raw, "not a valid domain name");
  }
  r.text = text;
  return r;
}

absl::StatusOr<std::vector<std::string>> ParseMethods(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view m : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string up = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(m));
    if (up == "ANY") return std::vector<std::string>{};
    if (up.empty() || !std::all_of(up.begin(), up.end(), absl::ascii_isupper)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid method \"", m, "\": use names such as GET,POST or ANY"));
    }
    if (std::find(out.begin(), out.end(), up) == out.end()) out.push_back(up);
  }
  return out;
}

absl::Status ValidatePathGlob(absl::string_view glob) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("invalid path \"", glob, "\": ", why));
  };
  if (glob.empty() || glob[0] != '/') return bad("it must start with '/'");
  if (glob.find('?') != absl::string_view::npos) return bad("no query ('?') is allowed");
  if (glob.find('#') != absl::string_view::npos) return bad("no fragment ('#') is allowed");
  for (absl::string_view seg : absl::StrSplit(glob, '/')) {
    if (seg == "..") return bad("no \"..\" segment is allowed");
  }
  return absl::OkStatus();
}

namespace {

// Both matchers below are the two-pointer wildcard match: on a mismatch
// the last star takes one more item and matching resumes after it, which
// is exact when every other token matches one item. The path is the
// guest's: trying every split at every star instead took exponential time
// in the number of stars (a kit's "/v2/*****..." against a long segment).

// SegmentMatches: '*' inside a segment matches any run of its characters.
bool SegmentMatches(absl::string_view glob, absl::string_view seg) {
  size_t g = 0, s = 0;
  size_t star = absl::string_view::npos, resume = 0;
  while (s < seg.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = s;
    } else if (g < glob.size() && glob[g] == seg[s]) {
      ++g;
      ++s;
    } else if (star != absl::string_view::npos) {
      g = star + 1;
      s = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

// SegmentsMatch: a "**" segment matches any number of segments, any other
// one segment.
bool SegmentsMatch(const std::vector<absl::string_view>& glob,
                   const std::vector<absl::string_view>& path) {
  size_t g = 0, p = 0;
  size_t star = std::string::npos, resume = 0;
  while (p < path.size()) {
    if (g < glob.size() && glob[g] == "**") {
      star = g++;
      resume = p;
    } else if (g < glob.size() && SegmentMatches(glob[g], path[p])) {
      ++g;
      ++p;
    } else if (star != std::string::npos) {
      g = star + 1;
      p = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == "**") ++g;
  return g == glob.size();
}

}  // namespace

bool PathMatches(absl::string_view glob, absl::string_view path) {
  std::vector<absl::string_view> g = absl::StrSplit(glob.substr(1), '/');
  std::vector<absl::string_view> p = absl::StrSplit(path.substr(std::min<size_t>(1, path.size())), '/');
  return SegmentsMatch(g, p);
}

std::string Rule::Text() const {
  std::string t = absl::StrCat(action == Action::kAllow ? "allow " : "deny ", resource.text);
  if (!methods.empty()) absl::StrAppend(&t, " ", absl::StrJoin(methods, ","));
  if (!paths.empty()) absl::StrAppend(&t, " ", absl::StrJoin(paths, ","));
  return t;
}

RuleSet::RuleSet(std::vector<Rule> rules) : rules_(std::move(rules)) {
  for (size_t i = 0; i < rules_.size(); ++i) {
    const Resource& r = rules_[i].resource;
    switch (r.kind) {
      case Resource::Kind::kAny: any_.push_back(i); break;
      case Resource::Kind::kDomain: exact_[r.domain].push_back(i); break;
      case Resource::Kind::kOneLabel: one_label_[r.domain].push_back(i); break;
      case Resource::Kind::kAnyDepth: any_depth_[r.domain].push_back(i); break;
      case Resource::Kind::kAddress:
        by_prefix_[r.prefix][Masked(r.address, r.prefix)].push_back(i);
        break;
    }
  }
}

void RuleSet::Candidates(const Request& req, std::vector<const Rule*>* out) const {
  auto add = [&](const std::vector<size_t>& ids) {
    for (size_t i : ids) out->push_back(&rules_[i]);
  };
  add(any_);
  if (!req.host.empty()) {
    if (auto it = exact_.find(req.host); it != exact_.end()) add(it->second);
    // Walk the suffixes: for a.b.example.com, "*." matches only
    // b.example.com, "**." every suffix.
    size_t dot = req.host.find('.');
    bool first = true;
    while (dot != std::string::npos) {
      std::string suffix = req.host.substr(dot + 1);
      if (first) {
        if (auto it = one_label_.find(suffix); it != one_label_.end()) add(it->second);
        first = false;
      }
      if (auto it = any_depth_.find(suffix); it != any_depth_.end()) add(it->second);
      dot = req.host.find('.', dot + 1);
    }
  }
  if (req.has_address) {
    for (const auto& [prefix, table] : by_prefix_) {
      if (auto it = table.find(Masked(req.address, prefix)); it != table.end()) add(it->second);
    }
  }
}

Decision RuleSet::Decide(const Request& req) const {
  std::vector<const Rule*> cands;
  Candidates(req, &cands);
  const Rule* allow = nullptr;
  const Rule* deny = nullptr;
  const Rule* http_only_allow = nullptr;
  bool saw_http_rule = false;
  bool path_rules = false;
  for (const Rule* r : cands) {
    if (!r->sandbox.empty() && r->sandbox != req.sandbox) continue;
    if (r->resource.port != 0 && req.port != 0 && r->resource.port != req.port) continue;
    if (!r->paths.empty()) path_rules = true;
    if (r->http_only()) {
      if (!req.http) {
        saw_http_rule = true;
        // A host granted only by method/path rules refuses other traffic;
        // an HTTP-level deny does not cover non-HTTP traffic either.
        if (r->action == Action::kAllow && http_only_allow == nullptr) http_only_allow = r;
        continue;
      }
      if (!r->methods.empty() &&
          std::find(r->methods.begin(), r->methods.end(), req.method) == r->methods.end()) {
        continue;
      }
      if (!r->paths.empty() &&
          std::none_of(r->paths.begin(), r->paths.end(),
                       [&](const std::string& g) { return PathMatches(g, req.path); })) {
        continue;
      }
    }
    if (r->action == Action::kDeny) {
      if (deny == nullptr) deny = r;
    } else if (allow == nullptr) {
      allow = r;
    }
  }
  std::string target = req.host.empty() ? "the address" : req.host;
  Decision d;
  d.inspect = !req.http && saw_http_rule && deny == nullptr;
  d.path_rules = path_rules;
  if (deny != nullptr) {
    d.action = Action::kDeny;
    d.rule = deny;
    d.reason = absl::StrCat("rule '", deny->Text(), "' denies ", target, " (deny beats allow)");
  } else if (allow != nullptr) {
    d.action = Action::kAllow;
    d.rule = allow;
    d.reason = absl::StrCat("rule '", allow->Text(), "' allows ", target);
  } else if (http_only_allow != nullptr) {
    d.action = Action::kDeny;
    d.rule = http_only_allow;
    d.reason = absl::StrCat(target, " is allowed only for HTTP requests ('",
                            http_only_allow->Text(), "'); other traffic is refused");
  } else {
    d.action = Action::kDeny;
    d.reason = absl::StrCat("no rule allows ", target, " (default deny)");
  }
  return d;
}

absl::StatusOr<Rule> ValidateRule(const RuleSpec& spec) {
  Rule r;
  r.action = spec.action;
  auto res = ParseResource(spec.resource);
  if (!res.ok()) return res.status();
  r.resource = *res;
  auto methods = ParseMethods(spec.methods);
  if (!methods.ok()) return methods.status();
  r.methods = *methods;
  for (const auto& p : spec.paths) {
    if (absl::Status s = ValidatePathGlob(p); !s.ok()) return s;
    r.paths.push_back(p);
  }
  r.sandbox = spec.sandbox;
  r.origin = spec.origin;
  return r;
}

}  // namespace airlock::policy
