// Processes on a sandbox's data plane: createProcess, listProcesses,
// getProcess, readOutput, signal, and the interact WebSocket (subprotocol
// sandboxes.v1: attach, stdin, closeStdin and resize in; chunk, exited and
// heartbeat out, resumable from a stream sequence).
#ifndef AIRLOCK_APID_PROCESSES_API_H_
#define AIRLOCK_APID_PROCESSES_API_H_

#include <string>

#include "apid/auth.h"
#include "apid/http_server.h"
#include "apid/process_table.h"
#include "apid/router.h"

namespace airlock::apid {

class ProcessesApi {
 public:
  ProcessesApi(std::string base_url, Authenticator* auth, ProcessTable* table)
      : base_url_(std::move(base_url)), auth_(auth), table_(table) {}

  void Register(Router* router);
  // Upgrade answers a WebSocket upgrade request (any path: a refusal for
  // anything but .../v1/processes/{process}/interact).
  WebSocketAccept Upgrade(const HttpRequest& req);

 private:
  HttpResponse Create(const HttpRequest& req, const std::string& uid);
  HttpResponse List(const HttpRequest& req, const std::string& uid);
  HttpResponse Get(const std::string& uid, const std::string& id);
  HttpResponse Output(const HttpRequest& req, const std::string& uid, const std::string& id);
  HttpResponse Signal(const HttpRequest& req, const std::string& uid, const std::string& id);

  std::string base_url_;
  Authenticator* auth_;
  ProcessTable* table_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_PROCESSES_API_H_
