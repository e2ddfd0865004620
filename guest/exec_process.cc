#include "guest/exec_process.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/fd_io.h"
#include "guest/egress.h"
#include "guest/reaper.h"
#include "guest/users.h"


namespace airlock::guest {
namespace {

// What the child reports through the CLOEXEC pipe when it fails before or
// at exec.
struct ChildFailure {
  int stage;  // 0 setup, 1 chdir, 2 exec
  int err;
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::vector<std::string> BaseEnvironment(const std::string& user, const std::string& home,
                                         const std::string& shell, bool tty) {
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=" + home,
      "USER=" + user,
      "LOGNAME=" + user,
      "SHELL=" + shell,
      "LANG=C.UTF-8",
  };
  // Egress: proxy-aware clients use the agent's forward proxy; the rest are
  // captured transparently. The interception CA is in the system bundle.
  for (const char* e : kEgressEnvironment) env.push_back(e);
  if (tty) env.push_back("TERM=xterm-256color");
  return env;
}

std::vector<std::string> MergeEnvironment(std::vector<std::string> base,
                                          const std::vector<std::string>& overrides) {
  for (const auto& kv : overrides) {
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (auto& b : base) {
      if (b.substr(0, b.find('=')) == key) {
        b = kv;
        replaced = true;
      }
    }
    if (!replaced) base.push_back(kv);
  }
  return base;
}

std::vector<std::string> ProgramCandidates(const std::string& program,
                                           const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos) return {program};
  // glibc's execvp without PATH: /bin, then /usr/bin.
  std::string path = "/bin:/usr/bin";
  for (const std::string& kv : env) {
    if (absl::StartsWith(kv, "PATH=")) path = kv.substr(5);
  }
  std::vector<std::string> out;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    // An empty entry is the working directory, as for execvp.
    out.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", program));
  }
  return out;
}

std::unique_ptr<ExecProcess> ExecProcess::Start(const ExecSpec& spec, ExecOutcome* failed,
                                                std::string* message) {
  if (spec.argv.empty()) {
    failed->code = 127;
    *message = "airlock: exec needs a command";
    return nullptr;
  }
  auto user = ResolveUser(spec.user, ReadFileToString("/etc/passwd"), ReadFileToString("/etc/group"));
  if (!user.ok()) {
    failed->code = 126;
    *message = absl::StrCat("airlock: ", user.status().message());
    return nullptr;
  }
  std::string workdir = spec.workdir;
  if (workdir.empty()) {
    struct stat st;
    std::string workspace = user->home + "/workspace";
    if (stat(workspace.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      workdir = workspace;
    } else {
      workdir = stat(user->home.c_str(), &st) == 0 ? user->home : "/";
    }
  }
  std::vector<std::string> env = MergeEnvironment(
      BaseEnvironment(user->name, user->home, user->shell, spec.tty), spec.env);

  std::unique_ptr<ExecProcess> p(new ExecProcess());
  p->tty_ = spec.tty;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  int master = -1;
  std::string slave_name;
  if (spec.tty) {
    master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
      failed->code = 126;
      *message = absl::StrCat("airlock: cannot allocate a terminal: ", strerror(errno));
      if (master >= 0) close(master);
      return nullptr;
    }
    slave_name = ptsname(master);
    struct winsize ws = {static_cast<unsigned short>(spec.rows ? spec.rows : 24),
                         static_cast<unsigned short>(spec.cols ? spec.cols : 80), 0, 0};
    ioctl(master, TIOCSWINSZ, &ws);
  } else {
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
      failed->code = 126;
      *message = "airlock: cannot create pipes";
      return nullptr;
    }
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0 || pipe2(p->exit_notify_, O_CLOEXEC) != 0) {
    failed->code = 126;
    *message = "airlock: cannot create pipes";
    return nullptr;
  }

  // Everything the child needs is prepared before Spawn: the child shares
  // the agent's memory and may only make system calls (reaper.h).
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // Where execvp would look for argv[0], with the command's own PATH (the
  // agent's environment has none; execvpe would search the agent's), and
  // the argv of /bin/sh for a file that is not an executable format.
  std::vector<std::string> candidates = ProgramCandidates(spec.argv[0], env);
  std::vector<char*> sh_argv = {const_cast<char*>("/bin/sh"), nullptr};
  for (size_t i = 1; i < spec.argv.size(); ++i) sh_argv.push_back(argv[i]);
  sh_argv.push_back(nullptr);
  const GuestUser u = *user;
  bool want_stdin = spec.stdin;
  auto child = [&] {
    auto fail = [&](int stage) {
      ChildFailure f{stage, errno};
      ssize_t unused = write(report[1], &f, sizeof(f));
      (void)unused;
      _exit(stage == 2 && f.err == ENOENT ? 127 : 126);
    };
    // Handlers first, while every signal is still blocked (Spawn).
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setsid();
    if (spec.tty) {
      int slave = open(slave_name.c_str(), O_RDWR);
      if (slave < 0) fail(0);
      ioctl(slave, TIOCSCTTY, 0);
      dup2(slave, 0);
      dup2(slave, 1);
      dup2(slave, 2);
      if (slave > 2) close(slave);
    } else {
      if (want_stdin) {
        dup2(in[0], 0);
      } else {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
      }
      dup2(out[1], 1);
      dup2(err[1], 2);
    }
    // Already the right identity (e.g. root running as root): nothing to
    // drop, and setgroups may be refused inside a user namespace.
    // Raw system calls: glibc's setuid and setgroups synchronize the ids of
    // every thread of the process they believe they run in, which here is
    // the agent (this process shares its memory).
    bool same = getuid() == u.uid && geteuid() == u.uid && getgid() == u.gid;
    if (!same && (syscall(SYS_setgroups, u.groups.size(), u.groups.data()) != 0 ||
                  syscall(SYS_setresgid, u.gid, u.gid, u.gid) != 0 ||
                  syscall(SYS_setresuid, u.uid, u.uid, u.uid) != 0)) {
      fail(0);
    }
    if (chdir(workdir.c_str()) != 0) fail(1);
    // execvp's search (not execvpe's, which reads the agent's PATH): a
    // directory where the file is missing is skipped, one where it cannot
    // be run is remembered, any other error ends the search.
    bool denied = false;
    for (const std::string& c : candidates) {
      execve(c.c_str(), argv.data(), envp.data());
      if (errno == ENOEXEC) {
        sh_argv[1] = const_cast<char*>(c.c_str());
        execve("/bin/sh", sh_argv.data(), envp.data());
        fail(2);
      }
      if (errno == EACCES) {
        denied = true;
      } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV &&
                 errno != ETIMEDOUT) {
        fail(2);
      }
    }
    errno = denied ? EACCES : ENOENT;
    fail(2);
  };
  p->pid_ = ChildReaper::Global().Spawn(child, p->exit_notify_[1]);
  close(report[1]);
  if (spec.tty) {
    p->stdout_fd_ = master;
    p->stdin_fd_ = dup(master);
  } else {
    close(in[0]);
    close(out[1]);
    close(err[1]);
    p->stdin_fd_ = in[1];
    p->stdout_fd_ = out[0];
    p->stderr_fd_ = err[0];
    if (!want_stdin) {
      close(in[1]);
      p->stdin_fd_ = -1;
    }
  }
  ChildFailure f{};
  ssize_t n = read(report[0], &f, sizeof(f));
  close(report[0]);
  if (p->pid_ < 0 || n == sizeof(f)) {
    if (p->pid_ > 0) ChildReaper::Global().Wait(p->pid_);
    if (p->pid_ < 0) f = {0, errno};
    failed->code = (f.stage == 2 && f.err == ENOENT) ? 127 : 126;
    const char* what = f.stage == 1 ? "cannot change to directory " : "";
    std::string subject = f.stage == 1 ? workdir : spec.argv[0];
    if (f.stage == 0) {
      *message = absl::StrCat("airlock: cannot switch to user ", u.name, ": ", strerror(f.err));
    } else if (f.stage == 2 && f.err == ENOENT) {
      *message = absl::StrCat("airlock: ", subject, ": command not found");
    } else {
      *message = absl::StrCat("airlock: ", what, subject, ": ", strerror(f.err));
    }
    p->pid_ = -1;
    return nullptr;
  }
  return p;
}

ExecProcess::~ExecProcess() {
  for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_, exit_notify_[0], exit_notify_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void ExecProcess::WriteStdin(absl::string_view data) {
  // A failure means the process closed its stdin or exited: nothing to do.
  if (stdin_fd_ >= 0) WriteAll(stdin_fd_, data);
}

void ExecProcess::CloseStdin() {
  if (tty_) {
    // A terminal has no EOF of its own: send the EOF character.
    WriteStdin("\x04");
    return;
  }
  if (stdin_fd_ >= 0) {
    close(stdin_fd_);
    stdin_fd_ = -1;
  }
}

void ExecProcess::Resize(unsigned rows, unsigned cols) {
  if (!tty_) return;
  struct winsize ws = {static_cast<unsigned short>(rows), static_cast<unsigned short>(cols), 0, 0};
  ioctl(stdout_fd_, TIOCSWINSZ, &ws);  // the kernel sends SIGWINCH
}

void ExecProcess::Signal(int sig) {
  // Not after the process ended: what it left running is left alone.
  ChildReaper::Global().SignalGroup(pid_, sig);
}

void ExecProcess::Detach() {
  detached_ = true;
  ChildReaper::Global().Forget(pid_);
}

ExecOutcome ExecProcess::Pump(const std::function<void(Stream, absl::string_view)>& sink) {
  bool out_open = true, err_open = stderr_fd_ >= 0, exited = false;
  int status = 0;
  int64_t exited_at = 0;
  char buf[65536];
  while (out_open || err_open) {
    if (exited && NowMs() - exited_at > 200) break;
    pollfd fds[3] = {{out_open ? stdout_fd_ : -1, POLLIN, 0},
                     {err_open ? stderr_fd_ : -1, POLLIN, 0},
                     {exited ? -1 : exit_notify_[0], POLLIN, 0}};
    int rc = poll(fds, 3, exited ? 50 : -1);
    if (rc < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (!fds[i].revents) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sink(i == 0 ? Stream::kStdout : Stream::kStderr, absl::string_view(buf, n));
      } else if (n == 0 || errno != EINTR) {
        // EOF on a pipe, or EIO on a pty master once the terminal is gone.
        (i == 0 ? out_open : err_open) = false;
      }
    }
    if (fds[2].revents && !exited) {
      char c;
      ssize_t unused = read(exit_notify_[0], &c, 1);
      (void)unused;
      exited = ChildReaper::Global().TryWait(pid_, &status);
      exited_at = NowMs();
    }
  }
  if (!exited) status = ChildReaper::Global().Wait(pid_);
  ExecOutcome o;
  if (WIFEXITED(status)) {
    o.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    o.signal = WTERMSIG(status);
    o.code = 128 + o.signal;
  }
  return o;
}

}  // namespace airlock::guest
