#include "apid/router.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "apid/api_error.h"

namespace airlock::apid {

namespace {
std::vector<std::string> Segments(const std::string& path) {
  return absl::StrSplit(path, '/', absl::SkipEmpty());
}
}  // namespace

void Router::Add(const std::string& method, const std::string& pattern, RouteHandler handler) {
  routes_.push_back({method, pattern, Segments(pattern), std::move(handler)});
}

bool Router::MatchSegments(const std::vector<std::string>& pattern,
                           const std::vector<std::string>& path, PathParams* params) {
  if (pattern.size() != path.size()) return false;
  PathParams found;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const std::string& p = pattern[i];
    if (p.size() > 2 && p.front() == '{' && p.back() == '}') {
      found[p.substr(1, p.size() - 2)] = path[i];
    } else if (p != path[i]) {
      return false;
    }
  }
  if (params != nullptr) *params = std::move(found);
  return true;
}

const RouteHandler* Router::Match(const std::string& method, const std::string& path,
                                  PathParams* params) const {
  std::vector<std::string> segs = Segments(path);
  for (const auto& r : routes_) {
    if (r.method == method && MatchSegments(r.segments, segs, params)) return &r.handler;
  }
  return nullptr;
}

HttpResponse Router::Handle(const HttpRequest& req, std::string* matched) const {
  std::vector<std::string> segs = Segments(req.path);
  std::vector<std::string> allowed;
  // HEAD is served as GET (the server sends no body).
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  for (const auto& r : routes_) {
    PathParams params;
    if (!MatchSegments(r.segments, segs, &params)) continue;
    if (r.method == method) {
      if (matched != nullptr) *matched = r.pattern;
      return r.handler(req, params);
    }
    allowed.push_back(r.method);
  }
  if (!allowed.empty()) {
    ApiError e;
    e.status = 405;
    e.code = "unimplemented";
    e.message = absl::StrCat(req.method, " is not allowed on ", req.path, " (allowed: ",
                             absl::StrJoin(allowed, ", "), ")");
    HttpResponse r = ErrorResponse(e);
    r.headers["Allow"] = absl::StrJoin(allowed, ", ");
    return r;
  }
  return ErrorResponse(ApiError::NotFound(absl::StrCat("no API operation at ", req.path)));
}

}  // namespace airlock::apid
