#include "common/daemon_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_posix.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/health_service.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/peer_cred.h"
#include "common/version.h"
#include "protos/daemon/v1/daemon.grpc.pb.h"

namespace airlock {
namespace {

// StopPipe's write end wakes Serve's stop waiter (RequestStop, or a signal
// forwarded by the signal thread). It exists from the first use on, so a
// stop requested before Serve reached its wait is not lost.
const int* StopPipe() {
  static int fds[2] = {-1, -1};
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(fds, O_CLOEXEC) != 0) abort();
  });
  return fds;
}

// Fills in the message of UNIMPLEMENTED replies that the generated service
// base classes send with none, so a caller learns what is missing.
class UnimplementedInterceptor : public grpc::experimental::Interceptor {
 public:
  UnimplementedInterceptor(std::string method, std::string daemon)
      : method_(std::move(method)), daemon_(std::move(daemon)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status s = methods->GetSendStatus();
      if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED && s.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::UNIMPLEMENTED,
            absl::StrCat(method_, " is not built yet in ", daemon_, " ", kVersion,
                         "; this release serves it as UNIMPLEMENTED")));
      }
    }
    methods->Proceed();
  }

 private:
  std::string method_;
  std::string daemon_;
};

class UnimplementedInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit UnimplementedInterceptorFactory(std::string daemon) : daemon_(std::move(daemon)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new UnimplementedInterceptor(info->method(), daemon_);
  }

 private:
  std::string daemon_;
};

// Serves airlock.daemon.v1.Daemon.
class DaemonInfoService final : public airlock::daemon::v1::Daemon::Service {
 public:
  DaemonInfoService(const DaemonConfig& config, std::vector<std::string> listen)
      : config_(config), listen_(std::move(listen)), started_(time(nullptr)) {}

  // AddListen adds an address known only once the server runs (the TCP
  // port chosen at BuildAndStart), while GetInfo may already be answering.
  void AddListen(std::string address) {
    std::lock_guard<std::mutex> lock(mu_);
    listen_.push_back(std::move(address));
  }

  grpc::Status GetInfo(grpc::ServerContext*, const airlock::daemon::v1::GetInfoRequest*,
                       airlock::daemon::v1::GetInfoResponse* out) override {
    out->set_name(config_.name);
    out->set_version(kVersion);
    out->set_pid(getpid());
    out->set_started_at(started_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& l : listen_) out->add_listen(l);
    }
    out->set_state_file(config_.StateFile());
    return grpc::Status::OK;
  }

 private:
  const DaemonConfig& config_;
  std::mutex mu_;
  std::vector<std::string> listen_;
  int64_t started_;
};

// BindUnixSocket listens on `path`, replacing a stale socket file but never
// one that a live process still accepts on.
absl::StatusOr<int> BindUnixSocket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path ", path, " is longer than ", sizeof(addr.sun_path) - 1,
        " bytes; choose a shorter --runtime-dir or --socket"));
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a socket; remove it"));
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      close(fd);
      return absl::AlreadyExistsError(
          absl::StrCat("another process already serves on ", path));
    }
    unlink(path.c_str());
    close(fd);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  }
  mode_t old = umask(0177);  // socket file 0600
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (rc != 0 || listen(fd, 128) != 0) {
    std::string err = strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("cannot listen on ", path, ": ", err));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonRuntime>> DaemonRuntime::Create(DaemonConfig config) {
  if (absl::Status s = EnsurePrivateDir(config.runtime_dir); !s.ok()) return s;
  if (absl::Status s = MakeDirs(config.state_dir, 0700); !s.ok()) return s;
  std::unique_ptr<DaemonRuntime> rt(new DaemonRuntime(std::move(config)));
  const DaemonConfig& c = rt->config_;

  std::string pid_path = absl::StrCat(c.runtime_dir, "/", c.name, ".pid");
  rt->lock_fd_ = open(pid_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (rt->lock_fd_ < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", pid_path, ": ", strerror(errno)));
  }
  if (flock(rt->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string other = ReadFileToString(pid_path);
    return absl::AlreadyExistsError(absl::StrCat(
        c.name, " is already running (pid ", other.empty() ? "?" : other, ", lock ",
        pid_path, ")"));
  }
  std::string pid = std::to_string(getpid());
  if (ftruncate(rt->lock_fd_, 0) != 0 ||
      pwrite(rt->lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return absl::InternalError(absl::StrCat("cannot write ", pid_path));
  }

  auto db = StateDb::Open(c.StateFile());
  if (!db.ok()) return db.status();
  rt->state_ = std::move(*db);
  return rt;
}

DaemonRuntime::~DaemonRuntime() {
  if (lock_fd_ >= 0) {
    unlink(absl::StrCat(config_.runtime_dir, "/", config_.name, ".pid").c_str());
    close(lock_fd_);
  }
}

void DaemonRuntime::RequestStop() {
  char c = 's';
  ssize_t unused = write(StopPipe()[1], &c, 1);
  (void)unused;
}

absl::Status DaemonRuntime::Serve(const std::vector<grpc::Service*>& services,
                                  std::function<void()> on_stop,
                                  std::function<void()> on_stopping) {
  const DaemonConfig& c = config_;
  auto listen_fd = BindUnixSocket(c.socket_path);
  if (!listen_fd.ok()) return listen_fd.status();

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int tcp_port = 0;
  if (!c.tcp_listen.empty()) {
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = ReadFileToString(c.tls_client_ca);
    ssl.pem_key_cert_pairs.push_back({ReadFileToString(c.tls_key), ReadFileToString(c.tls_cert)});
    if (ssl.pem_root_certs.empty() || ssl.pem_key_cert_pairs[0].private_key.empty() ||
        ssl.pem_key_cert_pairs[0].cert_chain.empty()) {
      close(*listen_fd);
      return absl::InvalidArgumentError(
          "cannot read --tls-cert, --tls-key or --tls-client-ca (empty or missing)");
    }
    builder.AddListeningPort(c.tcp_listen, grpc::SslServerCredentials(ssl), &tcp_port);
  }
  // The TCP port is known only after BuildAndStart (AddListen below).
  DaemonInfoService info(c, {absl::StrCat("unix:", c.socket_path)});
  builder.RegisterService(&info);
  for (grpc::Service* s : services) builder.RegisterService(s);
  HealthService health;
  builder.RegisterService(&health);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> ics;
  ics.push_back(std::make_unique<UnimplementedInterceptorFactory>(c.name));
  builder.experimental().SetInterceptorCreators(std::move(ics));

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || (!c.tcp_listen.empty() && tcp_port == 0)) {
    close(*listen_fd);
    unlink(c.socket_path.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot start the gRPC server",
                     c.tcp_listen.empty() ? "" : absl::StrCat(" on ", c.tcp_listen)));
  }
  std::string tcp;
  if (!c.tcp_listen.empty()) {
    std::string host = c.tcp_listen.substr(0, c.tcp_listen.rfind(':'));
    tcp = absl::StrCat("tcp:", host, ":", tcp_port, " (mTLS)");
    info.AddListen(tcp);
  }

  // Each accepted connection's credentials are recorded before gRPC reads
  // from it, then gRPC takes the fd over.
  std::atomic<bool> accepting{true};
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    int err = errno;
    close(*listen_fd);
    unlink(c.socket_path.c_str());
    health.Shutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return absl::InternalError(absl::StrCat("pipe: ", strerror(err)));
  }
  grpc::Server* raw_server = server.get();
  std::thread acceptor([&, lfd = *listen_fd] {
    while (accepting) {
      pollfd fds[2] = {{lfd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[1].revents) break;
      int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      auto creds = ReadPeerCredentials(fd);
      if (!creds.ok()) {
        close(fd);
        continue;
      }
      PeerRegistry::Global().Register(fd, *creds);
      grpc::AddInsecureChannelFromFd(raw_server, fd);
    }
  });

  health.SetServing(true);
  AIRLOCK_LOG_INFO("serving", {{"version", kVersion},
                               {"socket", c.socket_path},
                               {"tcp", tcp},
                               {"state", c.StateFile()}});

  // A dedicated thread turns the blocked stop signals into a pipe write.
  std::thread signals([] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sig = 0;
    sigwait(&set, &sig);
    RequestStop();
  });
  signals.detach();
  char ch;
  while (read(StopPipe()[0], &ch, 1) < 0 && errno == EINTR) {
  }

  AIRLOCK_LOG_INFO("stopping");
  health.SetServing(false);
  accepting = false;
  char w = 'w';
  ssize_t unused = write(wake[1], &w, 1);
  (void)unused;
  acceptor.join();
  close(*listen_fd);
  unlink(c.socket_path.c_str());
  health.Shutdown();
  if (on_stopping) on_stopping();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (on_stop) on_stop();
  close(wake[0]);
  close(wake[1]);
  AIRLOCK_LOG_INFO("stopped");
  return absl::OkStatus();
}

int DaemonMain(const std::string& name, int argc, char** argv,
               const std::vector<OptionSpec>& options,
               const std::function<absl::Status(DaemonRuntime&)>& run) {
  // Block the stop signals before gRPC starts any thread, so every thread
  // inherits the mask and only the signal thread in Serve receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  SetLogIdentity(name);
  std::vector<std::string> args(argv + 1, argv + argc);
  auto config = ParseDaemonConfig(name, args, options);
  if (!config.ok()) {
    if (config.status().code() == absl::StatusCode::kCancelled) {
      std::cout << config.status().message();
      return 0;
    }
    std::cerr << name << ": " << config.status().message() << "\n";
    return 2;
  }
  SetLogLevel(config->log_level);
  auto rt = DaemonRuntime::Create(*config);
  if (!rt.ok()) {
    AIRLOCK_LOG_ERROR("cannot start", {{"error", std::string(rt.status().message())}});
    return rt.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  absl::Status s = run(**rt);
  if (!s.ok()) {
    AIRLOCK_LOG_ERROR("exiting", {{"error", std::string(s.message())}});
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace airlock
