#include "vmmd/port_forwarder.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "protos/agent/v1/agent.grpc.pb.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;

absl::Status ValidatePortMapping(vmm::PortMapping* m) {
  if (m->protocol().empty()) m->set_protocol("tcp");
  if (m->protocol() != "tcp") {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol \"", m->protocol(), "\" is not supported; only tcp"));
  }
  if (m->sandbox_port() == 0 || m->sandbox_port() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("sandbox port ", m->sandbox_port(), " is not in 1..65535"));
  }
  if (m->host_port() > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("host port ", m->host_port(), " is not in 0..65535"));
  }
  if (m->host_ip().empty()) m->set_host_ip("127.0.0.1");
  in6_addr a6;
  in_addr a4;
  if (inet_pton(AF_INET, m->host_ip().c_str(), &a4) != 1 &&
      inet_pton(AF_INET6, m->host_ip().c_str(), &a6) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("host address \"", m->host_ip(), "\" is not an IP address"));
  }
  return absl::OkStatus();
}

bool SameMapping(const vmm::PortMapping& a, const vmm::PortMapping& b) {
  return a.sandbox_port() == b.sandbox_port() &&
         (a.host_port() == 0 || b.host_port() == 0 || a.host_port() == b.host_port()) &&
         (a.host_ip().empty() || b.host_ip().empty() || a.host_ip() == b.host_ip());
}

// One listening socket and the thread accepting on it.
struct PortForwarder::Listener {
  vmm::PortMapping mapping;
  // When set, every connection gets these bytes and is closed.
  std::string reply;
  int fd = -1;
  int wake[2] = {-1, -1};
  std::atomic<int> connections{0};
  std::thread thread;

  ~Listener() {
    char c = 'x';
    ssize_t unused = write(wake[1], &c, 1);
    (void)unused;
    if (thread.joinable()) thread.join();
    close(fd);
    close(wake[0]);
    close(wake[1]);
  }
};

namespace {

// Answer reads the client's request, sends `reply` and closes gracefully.
// Closing with the request unread would reset the connection, and a reset
// can discard the reply before the client reads it.
void Answer(int sock, const std::string& reply) {
  char buf[4096];
  pollfd p = {sock, POLLIN, 0};
  if (poll(&p, 1, 2000) > 0) {
    ssize_t unused = read(sock, buf, sizeof(buf));
    (void)unused;
  }
  WriteAll(sock, reply);
  shutdown(sock, SHUT_WR);
  // Drain what the client still sends until it closes (at most 2 s).
  for (int i = 0; i < 20 && poll(&p, 1, 100) >= 0; ++i) {
    if (p.revents && read(sock, buf, sizeof(buf)) <= 0) break;
  }
  close(sock);
}

// Carry runs one connection: socket <-> agent PortForward stream.
void Carry(int sock, uint32_t port, std::shared_ptr<grpc::Channel> channel, int wake_fd) {
  auto stub = airlock::agent::v1::Agent::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->PortForward(&ctx);
  airlock::agent::v1::PortData first;
  first.set_port(port);
  if (!stream->Write(first)) {
    close(sock);
    return;
  }
  std::thread outbound([&] {
    airlock::agent::v1::PortData in;
    while (stream->Read(&in)) {
      WriteAll(sock, in.data());
      if (in.eof()) shutdown(sock, SHUT_WR);
    }
    // The guest side ended (or nothing listened): cut the client too.
    shutdown(sock, SHUT_RDWR);
  });
  char buf[65536];
  while (true) {
    pollfd fds[2] = {{sock, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
    if (fds[1].revents) {
      ctx.TryCancel();  // the port was unpublished or the sandbox stopped
      break;
    }
    if (!fds[0].revents) continue;
    ssize_t n = read(sock, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    airlock::agent::v1::PortData out;
    if (n <= 0) {
      out.set_eof(true);
      stream->Write(out);
      break;
    }
    out.set_data(std::string(buf, n));
    if (!stream->Write(out)) break;
  }
  stream->WritesDone();
  outbound.join();
  stream->Finish();
  close(sock);
}

}  // namespace

PortForwarder::PortForwarder() = default;

PortForwarder::~PortForwarder() {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.clear();
}

namespace {

// BindListener binds and listens on `m`'s address; returns the fd and fills
// in the bound port.
absl::StatusOr<int> BindListener(vmm::PortMapping* m) {
  if (absl::Status s = ValidatePortMapping(m); !s.ok()) return s;
  bool v6 = m->host_ip().find(':') != std::string::npos;
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage ss{};
  socklen_t len;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(m->host_port()));
    inet_pton(AF_INET6, m->host_ip().c_str(), &a->sin6_addr);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(m->host_port()));
    inet_pton(AF_INET, m->host_ip().c_str(), &a->sin_addr);
    len = sizeof(*a);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 64) != 0) {
    int e = errno;
    close(fd);
    std::string where =
        absl::StrCat(v6 ? "[" : "", m->host_ip(), v6 ? "]" : "", ":", m->host_port());
    if (e == EADDRINUSE) {
      return absl::AlreadyExistsError(absl::StrCat(
          "host port ", where, " is already in use; choose another host port (or omit it "
          "for a free one)"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", where, ": ", strerror(e)));
  }
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  m->set_host_port(ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                            : reinterpret_cast<sockaddr_in*>(&ss)->sin_port));
  return fd;
}

}  // namespace

absl::StatusOr<vmm::PortMapping> ReserveHostPort(const vmm::PortMapping& requested) {
  vmm::PortMapping m = requested;
  auto fd = BindListener(&m);
  if (!fd.ok()) return fd.status();
  close(*fd);
  return m;
}

absl::StatusOr<vmm::PortMapping> PortForwarder::Open(const std::string& sandbox,
                                                     const vmm::PortMapping& requested,
                                                     ChannelFn channel) {
  return Listen(sandbox, requested, std::move(channel), "");
}

absl::StatusOr<vmm::PortMapping> PortForwarder::Listen(const std::string& sandbox,
                                                       const vmm::PortMapping& requested,
                                                       ChannelFn channel, std::string reply) {
  vmm::PortMapping m = requested;
  auto bound = BindListener(&m);
  if (!bound.ok()) return bound.status();
  int fd = *bound;
  auto l = std::make_unique<Listener>();
  l->mapping = m;
  l->reply = std::move(reply);
  l->fd = fd;
  if (pipe2(l->wake, O_CLOEXEC) != 0) {
    close(fd);
    return absl::InternalError("pipe failed");
  }
  Listener* raw = l.get();
  raw->thread = std::thread([raw, channel] {
    // Connection threads, each with a flag it sets when done; finished ones
    // are joined at the next accept so a long-lived port does not pile up.
    struct Conn {
      std::thread thread;
      std::shared_ptr<std::atomic<bool>> done;
    };
    std::vector<Conn> conns;
    auto reap = [&conns] {
      for (auto it = conns.begin(); it != conns.end();) {
        if (it->done->load()) {
          it->thread.join();
          it = conns.erase(it);
        } else {
          ++it;
        }
      }
    };
    while (true) {
      pollfd fds[2] = {{raw->fd, POLLIN, 0}, {raw->wake[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
      if (fds[1].revents) break;
      if (!fds[0].revents) continue;
      int sock = accept4(raw->fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (sock < 0) continue;
      if (!raw->reply.empty()) {
        Answer(sock, raw->reply);
        continue;
      }
      auto ch = channel();
      if (!ch.ok()) {
        close(sock);  // the sandbox is not reachable: refuse by closing
        continue;
      }
      reap();
      auto done = std::make_shared<std::atomic<bool>>(false);
      uint32_t port = raw->mapping.sandbox_port();
      int wake = raw->wake[0];
      conns.push_back({std::thread([=, channel = *ch] {
                         Carry(sock, port, channel, wake);
                         *done = true;
                       }),
                       done});
    }
    for (auto& c : conns) c.thread.join();
  });
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.emplace(sandbox, std::move(l));
  return m;
}

absl::Status PortForwarder::OpenResponder(const std::string& sandbox, const vmm::PortMapping& m,
                                          std::string reply) {
  auto opened = Listen(
      sandbox, m,
      [] { return absl::StatusOr<std::shared_ptr<grpc::Channel>>(absl::UnavailableError("")); },
      std::move(reply));
  return opened.status();
}

void PortForwarder::Close(const std::string& sandbox, const vmm::PortMapping& m) {
  std::unique_ptr<Listener> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto range = listeners_.equal_range(sandbox);
    for (auto it = range.first; it != range.second; ++it) {
      if (SameMapping(it->second->mapping, m)) {
        gone = std::move(it->second);
        listeners_.erase(it);
        break;
      }
    }
  }
}

void PortForwarder::CloseAll(const std::string& sandbox) {
  std::vector<std::unique_ptr<Listener>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto range = listeners_.equal_range(sandbox);
    for (auto it = range.first; it != range.second; ++it) gone.push_back(std::move(it->second));
    listeners_.erase(sandbox);
  }
}

}  // namespace airlock::vmmd
