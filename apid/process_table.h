// Processes started through a sandbox's data plane (createProcess): each
// one's vmmd Exec stream held open by a reader thread, its output kept in
// order with one-based stream sequences (a bounded window per process, so
// a client can resume), stdin, resize and signals forwarded. They live as
// long as apid runs; apid stopping ends them (vmmd kills a process whose
// call ends).
#ifndef AIRLOCK_APID_PROCESS_TABLE_H_
#define AIRLOCK_APID_PROCESS_TABLE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "apid/vmm_client.h"

namespace airlock::apid {

// OutputChunk is one piece of a process's output.
struct OutputChunk {
  int64_t sequence = 0;
  // "stdout", "stderr" or "pty".
  std::string stream;
  std::string data;
};

class Process {
 public:
  Process(std::string id, std::string sandbox, std::string label, std::string session,
          bool pty, std::unique_ptr<ExecSession> exec);
  ~Process();

  const std::string& id() const { return id_; }
  const std::string& sandbox() const { return sandbox_; }
  const std::string& label() const { return label_; }
  const std::string& session() const { return session_; }
  bool pty() const { return pty_; }

  struct Snapshot {
    int64_t pid = 0;
    bool exited = false;
    int exit_code = 0;
    std::string reason;
    int64_t last_sequence = 0;
    // Why the call itself failed (the sandbox is gone or not running);
    // OK when the process ran.
    absl::Status call_status;
  };
  Snapshot State();

  // Output returns retained chunks after sequence `after` up to about
  // `max_bytes` (whole chunks; the first always fits). FAILED_PRECONDITION
  // when output after `after` is no longer retained.
  absl::StatusOr<std::vector<OutputChunk>> Output(int64_t after, size_t max_bytes);
  // WaitFor blocks until there is output after `after`, the process
  // exited, or `timeout` passed.
  void WaitFor(int64_t after, std::chrono::milliseconds timeout);
  // WaitStarted blocks until the process has a pid or ended, or `timeout`.
  void WaitStarted(std::chrono::milliseconds timeout);

  absl::Status Stdin(const std::string& data);
  absl::Status CloseStdin();
  absl::Status Resize(int rows, int cols);
  absl::Status Signal(int signo);
  // Kill ends the call (and with it the process).
  void Kill();

 private:
  void ReadLoop();
  absl::Status Send(const airlock::vmm::v1::ExecRequest& req);

  const std::string id_, sandbox_, label_, session_;
  const bool pty_;
  std::unique_ptr<ExecSession> exec_;
  std::thread reader_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<OutputChunk> chunks_;
  size_t retained_bytes_ = 0;
  int64_t last_sequence_ = 0;
  int64_t pid_ = 0;
  bool exited_ = false;
  int exit_code_ = 0;
  std::string reason_;
  absl::Status call_status_;
};

class ProcessTable {
 public:
  explicit ProcessTable(VmmClient* vmm) : vmm_(vmm) {}
  ~ProcessTable() { Shutdown(); }

  // Start runs `start` in its sandbox. `label` empty picks "process-N";
  // a label in use in that sandbox fails with ALREADY_EXISTS.
  absl::StatusOr<std::shared_ptr<Process>> Start(const airlock::vmm::v1::ExecStart& start,
                                                 std::string label, const std::string& session);
  // Find returns the process `id` of `sandbox`, or null.
  std::shared_ptr<Process> Find(const std::string& sandbox, const std::string& id);
  // List returns `sandbox`'s processes, oldest first.
  std::vector<std::shared_ptr<Process>> List(const std::string& sandbox);
  // Forget ends and drops every process of `sandbox` (it was deleted).
  void Forget(const std::string& sandbox);
  // Shutdown ends every process, joins its reader, and refuses new ones.
  void Shutdown();

 private:
  VmmClient* vmm_;
  std::mutex mu_;
  // sandbox -> processes in start order.
  std::map<std::string, std::vector<std::shared_ptr<Process>>> by_sandbox_;
  // Labels of processes being started, per sandbox.
  std::map<std::string, std::set<std::string>> starting_;
  int64_t next_label_ = 1;
  bool closed_ = false;
};

// SignalNumber maps the API's signal names ("term", "kill", "int", "hup",
// "quit", "usr1", "usr2") to numbers; 0 for anything else.
int SignalNumber(const std::string& name);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_PROCESS_TABLE_H_
