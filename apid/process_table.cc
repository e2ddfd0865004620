#include "apid/process_table.h"

#include <signal.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "apid/signer.h"

namespace airlock::apid {

namespace vmm = airlock::vmm::v1;

namespace {
// Output kept per process for resuming; older chunks go first.
constexpr size_t kRetainBytes = 8u << 20;
// Exited processes kept per sandbox, for reading their output and exit.
constexpr size_t kKeepExited = 64;
// Processes running at once, per sandbox and in all.
constexpr size_t kMaxRunningPerSandbox = 64;
constexpr size_t kMaxRunning = 1024;
}  // namespace

int SignalNumber(const std::string& name) {
  static const std::map<std::string, int> kSignals = {
      {"term", SIGTERM}, {"kill", SIGKILL}, {"int", SIGINT},   {"hup", SIGHUP},
      {"quit", SIGQUIT}, {"usr1", SIGUSR1}, {"usr2", SIGUSR2}};
  auto it = kSignals.find(name);
  return it == kSignals.end() ? 0 : it->second;
}

Process::Process(std::string id, std::string sandbox, std::string label, std::string session,
                 bool pty, std::unique_ptr<ExecSession> exec)
    : id_(std::move(id)),
      sandbox_(std::move(sandbox)),
      label_(std::move(label)),
      session_(std::move(session)),
      pty_(pty),
      exec_(std::move(exec)) {
  reader_ = std::thread([this] { ReadLoop(); });
}

Process::~Process() {
  Kill();
  if (reader_.joinable()) reader_.join();
}

void Process::ReadLoop() {
  vmm::ExecResponse resp;
  bool got_exit = false;
  while (exec_->Read(&resp)) {
    if (resp.has_exit()) {
      // The exit is the last message; vmmd ends the call once the client
      // side is closed too.
      {
        std::lock_guard<std::mutex> lock(mu_);
        exit_code_ = resp.exit().code();
        if (resp.exit().signal() != 0) {
          reason_ = absl::StrCat("killed by signal ", resp.exit().signal());
        }
        exited_ = true;
        got_exit = true;
      }
      cv_.notify_all();
      exec_->CloseWrites();
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    switch (resp.msg_case()) {
      case vmm::ExecResponse::kStartedPid: pid_ = resp.started_pid(); break;
      case vmm::ExecResponse::kStdout:
      case vmm::ExecResponse::kStderr: {
        OutputChunk c;
        c.sequence = ++last_sequence_;
        c.stream = pty_ ? "pty" : (resp.has_stdout() ? "stdout" : "stderr");
        c.data = resp.has_stdout() ? resp.stdout() : resp.stderr();
        retained_bytes_ += c.data.size();
        chunks_.push_back(std::move(c));
        while (retained_bytes_ > kRetainBytes && chunks_.size() > 1) {
          retained_bytes_ -= chunks_.front().data.size();
          chunks_.pop_front();
        }
        break;
      }
      default: break;
    }
    cv_.notify_all();
  }
  absl::Status s = exec_->Finish();
  std::lock_guard<std::mutex> lock(mu_);
  exited_ = true;
  if (!got_exit) {
    exit_code_ = 137;
    reason_ = s.ok() ? "the process's exit status was lost" : std::string(s.message());
    if (pid_ == 0) call_status_ = s.ok() ? absl::UnavailableError(reason_) : s;
  }
  cv_.notify_all();
}

Process::Snapshot Process::State() {
  std::lock_guard<std::mutex> lock(mu_);
  return Snapshot{pid_, exited_, exit_code_, reason_, last_sequence_, call_status_};
}

absl::StatusOr<std::vector<OutputChunk>> Process::Output(int64_t after, size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OutputChunk> out;
  if (after < 0) return absl::InvalidArgumentError("resumeFrom must not be negative");
  if (after > last_sequence_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resumeFrom ", after, " is past the last output sequence ", last_sequence_));
  }
  int64_t first = chunks_.empty() ? last_sequence_ + 1 : chunks_.front().sequence;
  if (after + 1 < first) {
    return absl::FailedPreconditionError(absl::StrCat(
        "output after sequence ", after, " is no longer retained (the oldest kept is ", first,
        ")"));
  }
  size_t bytes = 0;
  for (const auto& c : chunks_) {
    if (c.sequence <= after) continue;
    if (!out.empty() && max_bytes > 0 && bytes + c.data.size() > max_bytes) break;
    bytes += c.data.size();
    out.push_back(c);
  }
  return out;
}

void Process::WaitFor(int64_t after, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return exited_ || last_sequence_ > after; });
}

void Process::WaitStarted(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return exited_ || pid_ != 0; });
}

absl::Status Process::Send(const vmm::ExecRequest& req) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (exited_) return absl::FailedPreconditionError("the process has exited");
  }
  if (!exec_->Write(req)) return absl::FailedPreconditionError("the process has exited");
  return absl::OkStatus();
}

absl::Status Process::Stdin(const std::string& data) {
  vmm::ExecRequest req;
  req.set_stdin(data);
  return Send(req);
}

absl::Status Process::CloseStdin() {
  vmm::ExecRequest req;
  req.set_stdin_eof(true);
  return Send(req);
}

absl::Status Process::Resize(int rows, int cols) {
  if (!pty_) return absl::FailedPreconditionError("resize needs a process started with a pty");
  if (rows < 1 || cols < 1 || rows > 65535 || cols > 65535) {
    return absl::InvalidArgumentError("rows and cols must be 1 to 65535");
  }
  vmm::ExecRequest req;
  req.mutable_resize()->set_rows(rows);
  req.mutable_resize()->set_cols(cols);
  return Send(req);
}

absl::Status Process::Signal(int signo) {
  vmm::ExecRequest req;
  req.set_signal(signo);
  return Send(req);
}

void Process::Kill() { exec_->Cancel(); }

absl::StatusOr<std::shared_ptr<Process>> ProcessTable::Start(const vmm::ExecStart& start,
                                                             std::string label,
                                                             const std::string& session) {
  const std::string& sandbox = start.sandbox();
  std::vector<std::shared_ptr<Process>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return absl::UnavailableError("apid is stopping");
    auto& list = by_sandbox_[sandbox];
    if (label.empty()) label = absl::StrCat("process-", next_label_++);
    if (starting_[sandbox].count(label)) {
      return absl::AlreadyExistsError(
          absl::StrCat("a process labelled \"", label, "\" exists in this sandbox"));
    }
    for (const auto& p : list) {
      if (p->label() == label) {
        return absl::AlreadyExistsError(
            absl::StrCat("a process labelled \"", label, "\" exists in this sandbox"));
      }
    }
    size_t running = 0, running_here = 0, exited = 0;
    for (const auto& [name, procs] : by_sandbox_) {
      for (const auto& p : procs) {
        bool done = p->State().exited;
        running += !done;
        if (name == sandbox) (done ? exited : running_here) += 1;
      }
    }
    running_here += starting_[sandbox].size();
    for (const auto& [name, labels] : starting_) running += labels.size();
    if (running_here >= kMaxRunningPerSandbox || running >= kMaxRunning) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "too many processes running (", running_here, " in this sandbox, ", running,
          " in all); wait for some to exit or signal them"));
    }
    // Forget the oldest exited processes past the bound.
    for (auto it = list.begin(); it != list.end() && exited > kKeepExited;) {
      if ((*it)->State().exited) {
        dropped.push_back(*it);
        it = list.erase(it);
        --exited;
      } else {
        ++it;
      }
    }
    starting_[sandbox].insert(label);
  }
  dropped.clear();  // joins their finished readers outside the lock
  auto release = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    starting_[sandbox].erase(label);
  };
  auto exec = vmm_->StartExec(start);
  if (!exec.ok()) {
    release();
    return exec.status();
  }
  std::string id = RandomHex(6);
  auto p = std::make_shared<Process>(id, sandbox, label, session, start.tty(), std::move(*exec));
  // The first answer says whether it started (a pid) or the call failed
  // (no such sandbox, not running): then there is no process to keep.
  p->WaitStarted(std::chrono::seconds(30));
  Process::Snapshot st = p->State();
  if (st.exited && st.pid == 0 && !st.call_status.ok()) {
    release();
    return st.call_status;
  }
  std::lock_guard<std::mutex> lock(mu_);
  starting_[sandbox].erase(label);
  if (closed_) {
    p->Kill();  // Shutdown ran meanwhile: nothing may outlive it
    return absl::UnavailableError("apid is stopping");
  }
  by_sandbox_[sandbox].push_back(p);
  return p;
}

std::shared_ptr<Process> ProcessTable::Find(const std::string& sandbox, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_sandbox_.find(sandbox);
  if (it == by_sandbox_.end()) return nullptr;
  for (const auto& p : it->second) {
    if (p->id() == id) return p;
  }
  return nullptr;
}

std::vector<std::shared_ptr<Process>> ProcessTable::List(const std::string& sandbox) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_sandbox_.find(sandbox);
  return it == by_sandbox_.end() ? std::vector<std::shared_ptr<Process>>() : it->second;
}

void ProcessTable::Forget(const std::string& sandbox) {
  std::vector<std::shared_ptr<Process>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_sandbox_.find(sandbox);
    if (it == by_sandbox_.end()) return;
    gone.swap(it->second);
    by_sandbox_.erase(it);
  }
  for (auto& p : gone) p->Kill();
}

void ProcessTable::Shutdown() {
  std::map<std::string, std::vector<std::shared_ptr<Process>>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    all.swap(by_sandbox_);
  }
  for (auto& [sandbox, list] : all) {
    for (auto& p : list) p->Kill();
  }
  all.clear();  // each Process joins its reader
}

}  // namespace airlock::apid
