// One process started by `exec` inside the guest: its user, environment and
// working directory, its stdio (pipes, or a pseudo-terminal), and the loop
// that carries its output until it exits.
#ifndef AIRLOCK_GUEST_EXEC_PROCESS_H_
#define AIRLOCK_GUEST_EXEC_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace airlock::guest {

// ExecSpec says what to run and how.
struct ExecSpec {
  std::vector<std::string> argv;
  // "KEY=VALUE" entries added to (and overriding) the defaults.
  std::vector<std::string> env;
  // "name", "uid" or "uid:gid"; empty means agent (or root).
  std::string user;
  // Empty means $HOME/workspace when it exists, else $HOME.
  std::string workdir;
  bool tty = false;
  unsigned rows = 24, cols = 80;
  // Forward stdin; without it the process reads EOF at once.
  bool stdin = false;
};

// ProgramCandidates is where execvp would look for `program`: itself when
// it names a directory, else each directory of the PATH in `env` ("KEY=VALUE"
// entries, the last PATH winning; /bin:/usr/bin without one).
std::vector<std::string> ProgramCandidates(const std::string& program,
                                           const std::vector<std::string>& env);

// ExecOutcome is how an exec ended.
struct ExecOutcome {
  // Exit code, 128+signal when killed; 126 not executable, 127 not found.
  int code = 0;
  int signal = 0;
};

enum class Stream { kStdout, kStderr };

class ExecProcess {
 public:
  // Start forks and execs. When the process cannot be started (unknown user,
  // missing workdir, argv[0] not found or not executable) it returns null,
  // sets `*failed` (126 or 127) and `*message` to a line for stderr.
  static std::unique_ptr<ExecProcess> Start(const ExecSpec& spec, ExecOutcome* failed,
                                            std::string* message);
  ~ExecProcess();

  pid_t pid() const { return pid_; }

  // WriteStdin, CloseStdin, Resize and Signal may be called from another
  // thread while Pump runs.
  void WriteStdin(absl::string_view data);
  void CloseStdin();
  void Resize(unsigned rows, unsigned cols);
  // Signal delivers `sig` to the process group.
  void Signal(int sig);

  // Pump hands output to `sink` as it arrives until the process has exited
  // and its output is drained, then returns the outcome. Output of
  // background processes that keep the streams open is read for at most
  // 200 ms after the exit.
  ExecOutcome Pump(const std::function<void(Stream, absl::string_view)>& sink);

  // Detach gives the process up: nobody will wait for it.
  void Detach();

 private:
  ExecProcess() = default;

  pid_t pid_ = -1;
  bool tty_ = false;
  int stdin_fd_ = -1;   // pipe write end, or the pty master (dup)
  int stdout_fd_ = -1;  // pipe read end, or the pty master
  int stderr_fd_ = -1;  // pipe read end; -1 with a tty
  int exit_notify_[2] = {-1, -1};
  bool detached_ = false;
};

// BaseEnvironment is the environment every exec starts from, before the
// request's entries: PATH, HOME, USER, LOGNAME, SHELL, LANG (and TERM with a
// tty).
std::vector<std::string> BaseEnvironment(const std::string& user, const std::string& home,
                                         const std::string& shell, bool tty);

// MergeEnvironment applies `overrides` ("K=V") on top of `base`.
std::vector<std::string> MergeEnvironment(std::vector<std::string> base,
                                          const std::vector<std::string>& overrides);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_EXEC_PROCESS_H_
