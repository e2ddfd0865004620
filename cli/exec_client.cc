#include "cli/exec_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <iostream>
#include <mutex>
#include <thread>

#include "common/fd_io.h"

namespace airlock::cli {

namespace vmm = airlock::vmm::v1;

namespace {

// Signals and window changes arrive on this pipe from the handler.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t unused = write(g_signal_pipe[1], &b, 1);
  (void)unused;
}

// RawTerminal puts the terminal in raw mode for its lifetime.
class RawTerminal {
 public:
  explicit RawTerminal(bool enable) {
    if (!enable || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    struct termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  struct termios saved_ {};
  bool active_ = false;
};

}  // namespace

std::variant<int, ExecRefusal> TryExec(vmm::Vmm::Stub& stub, const ExecOptions& o) {
  bool local_tty = o.tty && isatty(STDIN_FILENO);
  grpc::ClientContext ctx;
  auto stream = stub.Exec(&ctx);
  std::mutex write_mu;
  auto send = [&](const vmm::ExecRequest& r) {
    std::lock_guard<std::mutex> lock(write_mu);
    return stream->Write(r);
  };

  vmm::ExecRequest req;
  vmm::ExecStart* start = req.mutable_start();
  start->set_sandbox(o.sandbox);
  for (const auto& a : o.argv) start->add_argv(a);
  for (const auto& e : o.env) start->add_env(e);
  start->set_user(o.user);
  start->set_workdir(o.workdir);
  start->set_tty(o.tty);
  start->set_detach(o.detach);
  start->set_stdin(o.interactive);
  if (o.tty) {
    struct winsize ws {};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
      start->mutable_size()->set_rows(ws.ws_row);
      start->mutable_size()->set_cols(ws.ws_col);
    }
    if (const char* term = getenv("TERM")) start->add_env(std::string("TERM=") + term);
  }
  send(req);

  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return kExitCannotRun;
  int stop_pipe[2];
  if (pipe2(stop_pipe, O_CLOEXEC) != 0) return kExitCannotRun;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);

  RawTerminal raw(local_tty && !o.detach);
  // One thread forwards stdin (with -i), signals and window size changes,
  // until the exec ends.
  std::thread input([&] {
    bool stdin_open = o.interactive && !o.detach;
    char buf[32768];
    while (true) {
      pollfd fds[3] = {{stdin_open ? STDIN_FILENO : -1, POLLIN, 0},
                       {g_signal_pipe[0], POLLIN, 0},
                       {stop_pipe[0], POLLIN, 0}};
      if (poll(fds, 3, -1) < 0 && errno != EINTR) break;
      if (fds[2].revents) break;
      if (fds[0].revents) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        vmm::ExecRequest r;
        if (n > 0) {
          r.set_stdin(std::string(buf, n));
        } else {
          r.set_stdin_eof(true);
          stdin_open = false;
        }
        if (!send(r)) break;
      }
      if (fds[1].revents) {
        unsigned char sig;
        if (read(g_signal_pipe[0], &sig, 1) != 1) continue;
        vmm::ExecRequest r;
        if (sig == SIGWINCH) {
          struct winsize ws {};
          if (!o.tty || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0) continue;
          r.mutable_resize()->set_rows(ws.ws_row);
          r.mutable_resize()->set_cols(ws.ws_col);
        } else {
          r.set_signal(sig);
        }
        if (!send(r)) break;
      }
    }
  });

  int code = kExitCannotRun;
  bool exited = false;
  bool answered = false;
  vmm::ExecResponse resp;
  while (stream->Read(&resp)) {
    answered = true;
    switch (resp.msg_case()) {
      case vmm::ExecResponse::kStdout: WriteAll(STDOUT_FILENO, resp.stdout()); break;
      case vmm::ExecResponse::kStderr: WriteAll(STDERR_FILENO, resp.stderr()); break;
      case vmm::ExecResponse::kStartedPid:
        if (o.detach) std::cout << resp.started_pid() << std::endl;
        break;
      case vmm::ExecResponse::kExit:
        code = resp.exit().code();
        exited = true;
        {
          std::lock_guard<std::mutex> lock(write_mu);
          stream->WritesDone();
        }
        break;
      default: break;
    }
  }
  char b = 'x';
  ssize_t unused = write(stop_pipe[1], &b, 1);
  (void)unused;
  input.join();
  grpc::Status s = stream->Finish();
  for (int sig : {SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) signal(sig, SIG_DFL);
  close(stop_pipe[0]);
  close(stop_pipe[1]);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  // Refused before any answer: the caller tells what the refusal means.
  if (!exited && !answered && !s.ok()) return ExecRefusal{s};
  if (!exited) {
    return ExecFailed(o.sandbox,
                      s.ok() ? "the stream ended without an exit status" : s.error_message());
  }
  return code;
}

int ExecFailed(const std::string& sandbox, const std::string& why) {
  std::cerr << "airlock: exec in " << sandbox << ": " << why << "\n";
  return kExitCannotRun;
}

int RunExec(vmm::Vmm::Stub& stub, const ExecOptions& o) {
  auto outcome = TryExec(stub, o);
  if (const int* code = std::get_if<int>(&outcome)) return *code;
  return ExecFailed(o.sandbox, std::get<ExecRefusal>(outcome).status.error_message());
}

}  // namespace airlock::cli
