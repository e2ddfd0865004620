// Routes a request to its handler by method and path pattern; a pattern's
// "{name}" segment matches one non-empty segment and is handed over as a
// parameter. An unknown path is 404 and a known path with another method
// 405 (with Allow), both in the API's error shape.
#ifndef AIRLOCK_APID_ROUTER_H_
#define AIRLOCK_APID_ROUTER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "apid/http_types.h"

namespace airlock::apid {

using PathParams = std::map<std::string, std::string>;
using RouteHandler = std::function<HttpResponse(const HttpRequest&, const PathParams&)>;

class Router {
 public:
  // Add registers `handler` for `method` and `pattern` ("/v1/x/{id}").
  void Add(const std::string& method, const std::string& pattern, RouteHandler handler);
  // Handle dispatches; `*matched` (when given) gets the pattern that
  // matched, for logs.
  HttpResponse Handle(const HttpRequest& req, std::string* matched = nullptr) const;
  // Match finds the route without running it (for WebSocket upgrades).
  const RouteHandler* Match(const std::string& method, const std::string& path,
                            PathParams* params) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    RouteHandler handler;
  };
  static bool MatchSegments(const std::vector<std::string>& pattern,
                            const std::vector<std::string>& path, PathParams* params);
  std::vector<Route> routes_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_ROUTER_H_
