// The data plane of each sandbox, served at its endpoint URI
// (<base>/endpoints/<uid>): exec and files (raw, and multipart upload and
// download) over vmmd's guest calls. Every
// call needs an endpoint credential for that sandbox with the operation's
// permission (see auth.h); the guest is the jail, so a path means the
// guest's own path and nothing of the host.
#ifndef AIRLOCK_APID_DATA_PLANE_API_H_
#define AIRLOCK_APID_DATA_PLANE_API_H_

#include <string>

#include "apid/auth.h"
#include "apid/router.h"
#include "apid/vmm_client.h"

namespace airlock::apid {

struct DataPlaneOptions {
  std::string base_url;
  // Combined stdout+stderr kept by exec; past it the response says
  // incomplete (the command still runs to its end).
  size_t exec_output_limit = 16u << 20;
  // Largest file readFile returns (larger is refused, never truncated).
  size_t read_limit = 64u << 20;
};

class DataPlaneApi {
 public:
  DataPlaneApi(DataPlaneOptions options, Authenticator* auth, VmmClient* vmm);
  void Register(Router* router);

 private:
  HttpResponse Exec(const HttpRequest& req, const std::string& uid);
  HttpResponse ReadFile(const HttpRequest& req, const std::string& uid);
  HttpResponse WriteFile(const HttpRequest& req, const std::string& uid);
  HttpResponse Stat(const HttpRequest& req, const std::string& uid);
  HttpResponse List(const HttpRequest& req, const std::string& uid);
  HttpResponse Remove(const HttpRequest& req, const std::string& uid);
  HttpResponse Mkdir(const HttpRequest& req, const std::string& uid);
  HttpResponse Move(const HttpRequest& req, const std::string& uid);
  HttpResponse Upload(const HttpRequest& req, const std::string& uid);
  HttpResponse Download(const HttpRequest& req, const std::string& uid);

  DataPlaneOptions options_;
  Authenticator* auth_;
  VmmClient* vmm_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_DATA_PLANE_API_H_
