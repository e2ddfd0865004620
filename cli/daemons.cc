#include "cli/daemons.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/client.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "protos/daemon/v1/daemon.grpc.pb.h"

namespace airlock::cli {
namespace {

bool Executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string self(buf, n);
  return self.substr(0, self.rfind('/'));
}

// PidFromFile reads a daemon's pid file; 0 when absent or when that pid is
// no longer the daemon (a pid file left by a killed daemon).
pid_t LivePid(const std::string& pid_file, const std::string& name) {
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileToString(pid_file)), &pid) || pid <= 0) {
    return 0;
  }
  char buf[PATH_MAX];
  ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return 0;
  std::string exe(buf, n);
  // A daemon whose binary was replaced (an upgrade) still counts.
  constexpr absl::string_view kDeleted = " (deleted)";
  if (absl::EndsWith(exe, kDeleted)) exe.resize(exe.size() - kDeleted.size());
  std::string base = exe.substr(exe.rfind('/') + 1);
  return base == name ? pid : 0;
}

// Kept holds `channel` until the process leaves and returns it. The CLI
// leaves with _exit (main.cc) once its command is done. gRPC's library
// held by main keeps gRPC itself up, but not its event engine: the last
// channel going away stops that engine and joins its threads, on the
// command's way out, for nothing.
std::shared_ptr<grpc::Channel> Kept(std::shared_ptr<grpc::Channel> channel) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<grpc::Channel>>;
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(channel);
  return channel;
}

}  // namespace

Daemons::Daemons() : runtime_dir_(DefaultRuntimeDir()), state_dir_(DefaultStateDir()) {}

absl::StatusOr<Peer> Daemons::PeerOf(const std::string& name) const {
  std::string var = absl::StrCat("AIRLOCK_", absl::AsciiStrToUpper(name));
  const char* value = getenv(var.c_str());
  if (value == nullptr || *value == '\0') return Peer::Unix(SocketOf(name));
  auto env = [](const char* v) {
    const char* s = getenv(v);
    return std::string(s == nullptr ? "" : s);
  };
  auto tls = ReadPeerTls({env("AIRLOCK_TLS_CERT"), env("AIRLOCK_TLS_KEY"), env("AIRLOCK_TLS_CA")},
                         {"AIRLOCK_TLS_CERT", "AIRLOCK_TLS_KEY", "AIRLOCK_TLS_CA"});
  if (!tls.ok()) return tls.status();
  auto peer = ParsePeer(var, value, *tls);
  if (!peer.ok() && peer.status().message().find("mutual TLS") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        var, "=", value, " is TCP, which is dialed only with mutual TLS: set "
        "AIRLOCK_TLS_CERT, AIRLOCK_TLS_KEY and AIRLOCK_TLS_CA (plaintext TCP is never dialed)"));
  }
  return peer;
}

bool Daemons::IsRemote(const std::string& name) const {
  std::string var = absl::StrCat("AIRLOCK_", absl::AsciiStrToUpper(name));
  const char* value = getenv(var.c_str());
  return value != nullptr && *value != '\0';
}

std::shared_ptr<grpc::Channel> Daemons::Dial(const std::string& name) const {
  auto peer = PeerOf(name);
  return Kept(peer.ok() ? peer->Dial() : DialUnix(SocketOf(name)));
}

std::string Daemons::SocketOf(const std::string& name) const {
  return absl::StrCat(runtime_dir_, "/", name, ".sock");
}

std::string Daemons::LogOf(const std::string& name) const {
  return absl::StrCat(state_dir_, "/logs/", name, ".log");
}

absl::StatusOr<std::string> Daemons::BinaryOf(const std::string& name) const {
  std::vector<std::string> candidates;
  if (const char* dir = getenv("AIRLOCK_LIBEXEC_DIR"); dir != nullptr && *dir) {
    candidates.push_back(absl::StrCat(dir, "/", name));
  }
  std::string self = SelfDir();
  candidates.push_back(absl::StrCat(self, "/", name));            // installed side by side
  candidates.push_back(absl::StrCat(self, "/../", name, "/", name));  // bazel-bin layout
  for (const auto& c : candidates) {
    if (Executable(c)) return c;
  }
  return absl::NotFoundError(absl::StrCat(
      "cannot find the ", name, " binary (looked in ", candidates.front(),
      " and beside airlock); run tools/setup.sh or set AIRLOCK_LIBEXEC_DIR"));
}

std::vector<DaemonStatus> Daemons::Status() const {
  std::vector<DaemonStatus> out;
  for (const auto& name : DaemonNames()) {
    DaemonStatus st;
    st.name = name;
    st.socket = SocketOf(name);
    st.log = LogOf(name);
    st.remote = IsRemote(name);
    struct stat sb;
    std::shared_ptr<grpc::Channel> ch;
    if (st.remote) {
      // A remote daemon is asked where it is, never at another endpoint:
      // wrong TLS files leave it "unreachable".
      auto peer = PeerOf(name);
      st.socket = peer.ok() ? peer->address()
                            : std::string(getenv(
                                  absl::StrCat("AIRLOCK_", absl::AsciiStrToUpper(name)).c_str()));
      st.state = "unreachable";
      if (peer.ok()) ch = peer->Dial();
    } else {
      st.pid = LivePid(absl::StrCat(runtime_dir_, "/", name, ".pid"), name);
      st.state = st.pid ? "unhealthy" : "stopped";
      if (stat(st.socket.c_str(), &sb) == 0) ch = DialUnix(st.socket);
    }
    if (ch != nullptr) {
      auto stub = airlock::daemon::v1::Daemon::NewStub(ch);
      grpc::ClientContext ctx;
      DeadlineAfter(ctx, std::chrono::seconds(2));
      airlock::daemon::v1::GetInfoResponse info;
      if (stub->GetInfo(&ctx, {}, &info).ok() &&
          CheckHealth(*ch, std::chrono::seconds(2)).ok()) {
        st.state = "running";
        st.pid = info.pid();
        st.version = info.version();
      }
    }
    out.push_back(st);
  }
  return out;
}

absl::Status Daemons::Start(bool progress) {
  if (absl::Status s = EnsurePrivateDir(runtime_dir_); !s.ok()) return s;
  if (absl::Status s = MakeDirs(state_dir_ + "/logs", 0700); !s.ok()) return s;
  std::vector<DaemonStatus> before = Status();
  std::vector<std::pair<std::string, pid_t>> launched;
  absl::Status remote_down = absl::OkStatus();
  for (const auto& st : before) {
    if (st.state == "running") continue;
    if (st.remote) {
      // Not ours to start; the local ones still are, and are waited for.
      if (!remote_down.ok()) continue;
      auto peer = PeerOf(st.name);
      remote_down = peer.ok()
          ? absl::UnavailableError(absl::StrCat(
                st.name, " at ", peer->address(), " (AIRLOCK_", absl::AsciiStrToUpper(st.name),
                ") does not answer; it runs on another host: start it there, or unset the "
                "variable to use a local one"))
          : peer.status();
      continue;
    }
    if (st.state == "unhealthy") {
      // A live process holds the lock but does not answer: give it a moment
      // (it may be starting) before declaring it stuck.
      auto ch = DialUnix(st.socket);
      if (WaitHealthy(*ch, std::chrono::seconds(10)).ok()) continue;
      return absl::UnavailableError(absl::StrCat(
          st.name, " (pid ", st.pid, ") runs but does not answer on ", st.socket,
          "; see ", st.log, " or run `airlock daemon stop`"));
    }
    auto bin = BinaryOf(st.name);
    if (!bin.ok()) return bin.status();
    if (progress) std::cerr << "starting " << st.name << "\n";
    std::vector<std::string> argv = {*bin, "--runtime-dir=" + runtime_dir_,
                                     "--state-dir=" + state_dir_};
    // A daemon's own options (proxyd's --resolve, say) come from
    // <state-dir>/<name>.conf when there is one.
    std::string conf = absl::StrCat(state_dir_, "/", st.name, ".conf");
    if (access(conf.c_str(), R_OK) == 0) argv.push_back("--config=" + conf);
    // Where the REST API listens, for a second daemon set on one machine
    // (tests use 127.0.0.1:0); a flag wins over apid.conf.
    if (const char* listen = getenv("AIRLOCK_API_LISTEN");
        st.name == "apid" && listen != nullptr && *listen) {
      argv.push_back(absl::StrCat("--listen=", listen));
    }
    auto pid = SpawnDetached(argv, st.log);
    if (!pid.ok()) return pid.status();
    launched.emplace_back(st.name, *pid);
  }
  for (const auto& [name, pid] : launched) {
    auto ch = DialUnix(SocketOf(name));
    absl::Status s = WaitHealthy(*ch, std::chrono::seconds(30));
    if (!s.ok()) {
      std::string log = ReadFileToString(LogOf(name));
      if (log.size() > 2000) log = log.substr(log.size() - 2000);
      return absl::UnavailableError(absl::StrCat(name, " did not become healthy: ", s.message(),
                                                 "\nlast lines of ", LogOf(name), ":\n", log));
    }
  }
  return remote_down;
}

absl::Status Daemons::Stop(int grace_s, bool progress) {
  std::vector<std::string> names = DaemonNames();
  // Stop in reverse start order: vmmd first, so it can shut its sandboxes
  // down while the others still answer.
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string& name = *it;
    // A daemon named by $AIRLOCK_<NAME> is someone else's to stop, even
    // when one of that name also runs here.
    if (IsRemote(name)) continue;
    pid_t pid = LivePid(absl::StrCat(runtime_dir_, "/", name, ".pid"), name);
    if (pid == 0) continue;
    if (progress) std::cerr << "stopping " << name << " (pid " << pid << ")\n";
    kill(pid, SIGTERM);
    if (!AwaitExit(pid, std::chrono::seconds(grace_s))) {
      std::cerr << name << " did not stop within " << grace_s << " s; killing it\n";
      kill(pid, SIGKILL);
      if (!AwaitExit(pid, std::chrono::seconds(5))) {
        return absl::InternalError(absl::StrCat(name, " survived SIGKILL"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Daemons::EnsureRunning(const std::string& name,
                                    std::shared_ptr<grpc::Channel>* channel) {
  auto peer = PeerOf(name);
  if (!peer.ok()) return peer.status();
  // One health check on the daemon asked for is the common, fast path.
  std::shared_ptr<grpc::Channel> dialed = peer->Dial();
  absl::Status health = CheckHealth(*dialed, std::chrono::seconds(IsRemote(name) ? 5 : 2));
  if (health.ok()) {
    if (channel != nullptr) *channel = Kept(std::move(dialed));
    return absl::OkStatus();
  }
  if (IsRemote(name)) {
    return absl::UnavailableError(absl::StrCat(
        name, " at ", peer->address(), " (AIRLOCK_", absl::AsciiStrToUpper(name),
        ") does not answer: ", health.message(),
        "; it runs on another host: start it there, or check the TLS files"));
  }
  absl::Status started = Start(isatty(STDERR_FILENO));
  if (started.ok() && channel != nullptr) *channel = Dial(name);
  return started;
}

std::shared_ptr<grpc::Channel> ChannelTo(const std::string& name, int* exit_code) {
  Daemons d;
  if (absl::Status s = d.EnsureRunning(name); !s.ok()) {
    std::cerr << "airlock: cannot start the daemons: " << s.message() << "\n";
    *exit_code = 1;
    return nullptr;
  }
  return d.Dial(name);
}

}  // namespace airlock::cli
