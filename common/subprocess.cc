#include "common/subprocess.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"

namespace airlock {
namespace {

void ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
}

std::vector<char*> Argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// Environment is this process's environment with `overrides` set.
std::vector<std::string> Environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (overrides.count(entry.substr(0, entry.find('='))) == 0) out.push_back(std::move(entry));
  }
  for (const auto& [k, v] : overrides) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         const std::string& stdin_data, int timeout_s) {
  CommandResult r;
  int in[2], out[2], err[2];
  if (argv.empty() || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
    r.err = "cannot start command";
    return r;
  }
  std::vector<char*> args = Argv(argv);
  // The environment is made here: the child of a multi-threaded process
  // may take no lock another thread could have held at the fork (setenv's).
  std::vector<std::string> environment = Environment(env);
  std::vector<char*> envp = Argv(environment);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    ResetSignals();
    execvpe(args[0], args.data(), envp.data());
    dprintf(2, "cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // Feed stdin without blocking on a child that does not read it.
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  size_t fed = 0;
  if (stdin_data.empty()) {
    close(in[1]);
    in[1] = -1;
  }
  time_t deadline = time(nullptr) + timeout_s;
  bool out_open = true, err_open = true, timed_out = false;
  char buf[65536];
  while (out_open || err_open) {
    pollfd fds[3] = {{out_open ? out[0] : -1, POLLIN, 0},
                     {err_open ? err[0] : -1, POLLIN, 0},
                     {in[1], POLLOUT, 0}};
    int left = static_cast<int>(deadline - time(nullptr));
    if (left <= 0) {
      kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
    if (poll(fds, 3, left * 1000) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!fds[i].revents) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? r.out : r.err).append(buf, n);
      }
    }
    if (in[1] >= 0 && fds[2].revents) {
      ssize_t n = write(in[1], stdin_data.data() + fed, stdin_data.size() - fed);
      if (n > 0) fed += n;
      if (n < 0 || fed == stdin_data.size()) {
        close(in[1]);
        in[1] = -1;
      }
    }
  }
  if (in[1] >= 0) close(in[1]);
  close(out[0]);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    r.exit_code = -1;
  } else if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  return r;
}

absl::StatusOr<pid_t> SpawnDetached(const std::vector<std::string>& argv,
                                    const std::string& log_path, int pass_fd, int pass_as) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", strerror(errno)));
  }
  // The grandchild reports its pid, then (on exec failure) its errno; a
  // successful exec closes the CLOEXEC pipe with nothing more.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(log_fd);
    return absl::InternalError("pipe failed");
  }
  std::vector<char*> args = Argv(argv);
  pid_t child = fork();
  if (child == 0) {
    setsid();
    pid_t grandchild = fork();
    if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
    pid_t self = getpid();
    ssize_t unused = write(report[1], &self, sizeof(self));
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    // Above every descriptor set below, then where the program expects it
    // (dup2 clears close-on-exec). A program that was to get one and
    // cannot does not start.
    int passed = pass_fd >= 0 ? fcntl(pass_fd, F_DUPFD_CLOEXEC, 16) : -1;
    if (pass_fd >= 0 && passed < 0) {
      int e = errno;
      unused = write(report[1], &e, sizeof(e));
      _exit(127);
    }
    int report_fd = passed >= 0 ? fcntl(report[1], F_DUPFD_CLOEXEC, 16) : report[1];
    dup2(devnull, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    if (passed >= 0) dup2(passed, pass_as);
    ResetSignals();
    execvp(args[0], args.data());
    int e = errno;
    unused = write(report_fd, &e, sizeof(e));
    (void)unused;
    _exit(127);
  }
  close(log_fd);
  close(report[1]);
  int status;
  waitpid(child, &status, 0);
  pid_t pid = 0;
  int exec_errno = 0;
  ssize_t n = read(report[0], &pid, sizeof(pid));
  ssize_t m = n == sizeof(pid) ? read(report[0], &exec_errno, sizeof(exec_errno)) : 0;
  close(report[0]);
  if (n != sizeof(pid)) return absl::InternalError("fork failed");
  if (m == sizeof(exec_errno)) {
    return absl::NotFoundError(
        absl::StrCat("cannot run ", argv[0], ": ", strerror(exec_errno)));
  }
  return pid;
}

namespace {

// A task's state letter from its stat line ('\0' when it is gone).
char TaskState(const std::string& stat_path) {
  std::string stat = ReadFileToString(stat_path);
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '\0';
}

bool Exited(char state) { return state == '\0' || state == 'Z' || state == 'X'; }

}  // namespace

bool ProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  const std::string dir = absl::StrCat("/proc/", pid);
  if (!Exited(TaskState(dir + "/stat"))) return true;
  // The leader shows as a zombie as soon as its own thread has exited, while
  // the others may still be tearing down and hold the process's files (a
  // killed QEMU's disk lock): alive until every thread has exited.
  DIR* tasks = opendir((dir + "/task").c_str());
  if (tasks == nullptr) return false;
  bool alive = false;
  while (!alive) {
    dirent* e = readdir(tasks);
    if (e == nullptr) break;
    if (e->d_name[0] == '.') continue;
    alive = !Exited(TaskState(absl::StrCat(dir, "/task/", e->d_name, "/stat")));
  }
  closedir(tasks);
  return alive;
}

bool AwaitExit(pid_t pid, std::chrono::milliseconds timeout, bool* woken_by_pidfd) {
  using std::chrono::steady_clock;
  if (woken_by_pidfd != nullptr) *woken_by_pidfd = false;
  const auto deadline = steady_clock::now() + timeout;
  auto left_ms = [&] {
    // Rounded up (a wait cut at a whole millisecond would end before the
    // deadline), and at most what poll takes: a longer wait is several.
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady_clock::now());
    return static_cast<int>(std::clamp<int64_t>(ms.count(), 0, INT_MAX));
  };
  // A pidfd is readable once the whole thread group has exited, which is
  // ProcessAlive's sense too; it is checked again after each wake-up
  // because a pid can be reused between the caller's look and the open.
  int pidfd = pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, pid, 0)) : -1;
  bool alive = ProcessAlive(pid);
  while (alive && left_ms() > 0) {
    if (pidfd >= 0) {
      pollfd p = {pidfd, POLLIN, 0};
      int n = poll(&p, 1, left_ms());
      // Readable while ProcessAlive still sees a thread, or an error: the
      // pidfd says no more than polling would, and would spin.
      if ((n > 0 && ProcessAlive(pid)) || (n < 0 && errno != EINTR)) {
        close(pidfd);
        pidfd = -1;
      } else if (n > 0 && woken_by_pidfd != nullptr) {
        *woken_by_pidfd = true;
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(20, left_ms())));
    }
    alive = ProcessAlive(pid);
  }
  if (pidfd >= 0) close(pidfd);
  return !alive;
}

std::string ProcessCmdline(pid_t pid) {
  std::string cmd = ReadFileToString(absl::StrCat("/proc/", pid, "/cmdline"));
  for (char& c : cmd) {
    if (c == '\0') c = ' ';
  }
  return cmd;
}

std::vector<pid_t> ProcessesMatching(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    if (ProcessCmdline(pid).find(needle) != std::string::npos && ProcessAlive(pid)) {
      out.push_back(pid);
    }
  }
  closedir(d);
  return out;
}

}  // namespace airlock
