#include "guest/channel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/channel_hello.h"

namespace airlock::guest {
namespace {

// Buffer is bytes read from one side and not yet written to the other.
struct Buffer {
  char data[65536];
  size_t len = 0;
  size_t off = 0;
  bool empty() const { return off == len; }
};

// Fill reads into an empty buffer; false on EOF or error.
bool Fill(int fd, Buffer* b) {
  ssize_t n = read(fd, b->data, sizeof(b->data));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;
  b->len = n;
  b->off = 0;
  return true;
}

// Drain writes what the buffer holds; false on error.
bool Drain(int fd, Buffer* b) {
  ssize_t n = write(fd, b->data + b->off, b->len - b->off);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n < 0) return false;
  b->off += n;
  return true;
}

// Pump copies bytes both ways until the host hangs up or gRPC closes its
// end. `pending` are bytes already read from the port for this connection.
void Pump(int port, int sock, const std::string& pending) {
  Buffer to_sock, to_port;
  size_t n = std::min(pending.size(), sizeof(to_sock.data));
  memcpy(to_sock.data, pending.data(), n);
  to_sock.len = n;
  while (true) {
    pollfd fds[2] = {
        {port, static_cast<short>((to_sock.empty() ? POLLIN : 0) | (to_port.empty() ? 0 : POLLOUT)), 0},
        {sock, static_cast<short>((to_port.empty() ? POLLIN : 0) | (to_sock.empty() ? 0 : POLLOUT)), 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents & (POLLHUP | POLLERR)) return;  // vmmd disconnected
    if (fds[1].revents & (POLLHUP | POLLERR)) return;
    if ((fds[0].revents & POLLIN) && !Fill(port, &to_sock)) return;
    if ((fds[1].revents & POLLIN) && !Fill(sock, &to_port)) return;
    if (!to_sock.empty() && !Drain(sock, &to_sock)) return;
    if (!to_port.empty() && !Drain(port, &to_port)) return;
  }
}

// ReadSome waits up to a second for bytes on the port and appends what it
// reads (possibly nothing) to `buf`; false when the host hung up.
bool ReadSome(int port, std::string* buf) {
  pollfd p = {port, POLLIN, 0};
  if (poll(&p, 1, 1000) < 0 && errno != EINTR) return false;
  if (p.revents & POLLHUP) return false;
  if (!(p.revents & POLLIN)) return true;
  char chunk[4096];
  ssize_t n = read(port, chunk, sizeof(chunk));
  if (n == 0) return false;
  if (n > 0) buf->append(chunk, n);
  return true;
}

// AwaitHello reads the port until vmmd's hello line arrives, answers it, and
// returns the bytes that followed it; false when the host hung up first.
bool AwaitHello(int port, std::string* pending) {
  std::string buf, nonce;
  while (true) {
    if (!ReadSome(port, &buf)) return false;
    if (!FindLine(&buf, kHelloPrefix, &nonce)) continue;
    std::string ok = absl::StrCat(kOkPrefix, nonce, "\n");
    size_t off = 0;
    while (off < ok.size()) {
      pollfd w = {port, POLLOUT, 0};
      if (poll(&w, 1, 1000) <= 0 || (w.revents & POLLHUP)) return false;
      ssize_t m = write(port, ok.data() + off, ok.size() - off);
      if (m > 0) off += m;
    }
    *pending = buf;
    return true;
  }
}

// HostConnected is true when the port does not report hang-up.
bool HostConnected(int port) {
  pollfd p = {port, POLLIN, 0};
  return poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP);
}

// AwaitStreamStart reads the port until what follows the answered hello is
// the host's stream (DropLeadingHellos), leaving it in `pending`; false
// when the host hung up first.
bool AwaitStreamStart(int port, std::string* pending) {
  while (!DropLeadingHellos(pending)) {
    if (!ReadSome(port, pending)) return false;
  }
  return true;
}

}  // namespace

bool DropLeadingHellos(std::string* buf) {
  const absl::string_view hello = kHelloPrefix;
  while (true) {
    size_t n = std::min(buf->size(), hello.size());
    if (buf->compare(0, n, hello.data(), n) != 0) return true;
    size_t nl = buf->find('\n');
    if (nl == std::string::npos) return buf->size() > kMaxHelloLine;
    buf->erase(0, nl + 1);
  }
}

absl::StatusOr<std::string> FindVirtioPort(const std::string& name) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    if (DIR* d = opendir("/sys/class/virtio-ports")) {
      while (dirent* e = readdir(d)) {
        std::ifstream f(absl::StrCat("/sys/class/virtio-ports/", e->d_name, "/name"));
        std::string n;
        std::getline(f, n);
        if (absl::StripAsciiWhitespace(n) == name) {
          std::string dev = absl::StrCat("/dev/", e->d_name);
          closedir(d);
          return dev;
        }
      }
      closedir(d);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::NotFoundError(absl::StrCat("no virtio-serial port named ", name));
}

void ServePort(grpc::Server* server, const std::string& device,
               const std::function<void()>& on_ready) {
  int port = open(device.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (port < 0) {
    on_ready();  // let the caller report; nothing can be served
    while (true) pause();
  }
  on_ready();
  while (true) {
    while (!HostConnected(port)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string pending;
    if (!AwaitHello(port, &pending) || !AwaitStreamStart(port, &pending)) continue;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    fcntl(sp[0], F_SETFL, O_NONBLOCK);
    fcntl(sp[1], F_SETFL, O_NONBLOCK);
    grpc::AddInsecureChannelFromFd(server, sp[0]);  // gRPC owns sp[0] now
    Pump(port, sp[1], pending);
    close(sp[1]);
  }
}

void ServeRawPort(const std::string& device,
                  const std::function<void(int fd, std::string pending)>& serve) {
  int port = open(device.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  while (port < 0) pause();  // nothing can be served; the boot reports the port
  while (true) {
    while (!HostConnected(port)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string pending;
    if (!AwaitHello(port, &pending) || !AwaitStreamStart(port, &pending)) continue;
    int fd = dup(port);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    serve(fd, std::move(pending));
  }
}

}  // namespace airlock::guest
