#include "proxyd/stream.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "proxyd/fibers.h"
#include "proxyd/http.h"

namespace airlock::proxyd {

Stream::~Stream() {
  ssl_.reset();
  if (sockets_ != nullptr && fd_ >= 0) sockets_->Remove(fd_);
  if (fd_ >= 0) close(fd_);
}

int Stream::Release() {
  int fd = fd_;
  if (sockets_ != nullptr && fd_ >= 0) sockets_->Remove(fd_);
  fd_ = -1;
  write_shut_ = true;
  return fd;
}

bool Stream::WaitFor(short events) {
  pollfd p = {fd_, events, 0};
  while (true) {
    int r = Poll(&p, 1, static_cast<int>(timeout_.count()));
    if (r > 0) return true;
    if (r < 0 && errno == EINTR) continue;
    errno = ETIMEDOUT;
    return false;
  }
}

ssize_t Stream::Read(char* buf, size_t n) {
  if (!unread_.empty()) {
    size_t k = std::min(n, unread_.size());
    memcpy(buf, unread_.data(), k);
    unread_.erase(0, k);
    return static_cast<ssize_t>(k);
  }
  if (wait_first_) {
    wait_first_ = false;
    if (!TlsLeftovers() && !WaitFor(POLLIN)) return -1;
  }
  while (true) {
    if (ssl_ != nullptr) {
      // OpenSSL's error queue and errno belong to the thread, which other
      // fibers used while this one waited: what they left must not be
      // taken for this call's failure.
      ERR_clear_error();
      errno = 0;
      int r = SSL_read(ssl_.get(), buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
      if (r > 0) return r;
      int err = SSL_get_error(ssl_.get(), r);
      if (err == SSL_ERROR_ZERO_RETURN) return 0;
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (!WaitFor(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) return -1;
        continue;
      }
      return -1;
    }
    ssize_t r = recv(fd_, buf, n, MSG_DONTWAIT);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (!WaitFor(POLLIN)) return -1;
  }
}

bool Stream::WriteAll(absl::string_view data) {
  while (!data.empty()) {
    if (ssl_ != nullptr) {
      // After a WANT_ the same bytes are offered again, as OpenSSL asks.
      ERR_clear_error();  // as in Read
      int r = SSL_write(ssl_.get(), data.data(),
                        static_cast<int>(std::min<size_t>(data.size(), 1 << 20)));
      if (r > 0) {
        data.remove_prefix(r);
        continue;
      }
      int err = SSL_get_error(ssl_.get(), r);
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) return false;
      if (!WaitFor(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) return false;
      continue;
    }
    ssize_t r = send(fd_, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r > 0) {
      data.remove_prefix(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFor(POLLOUT)) return false;
      continue;
    }
    return false;
  }
  return true;
}

void Stream::ShutdownWrite() {
  if (write_shut_) return;
  write_shut_ = true;
  if (ssl_ != nullptr) {
    // close_notify whole before the FIN; a socket that stays full for a
    // second gets the FIN anyway.
    for (int tries = 0; tries < 10; ++tries) {
      ERR_clear_error();
      int r = SSL_shutdown(ssl_.get());
      if (r >= 0 || SSL_get_error(ssl_.get(), r) != SSL_ERROR_WANT_WRITE) break;
      pollfd p = {fd_, POLLOUT, 0};
      if (Poll(&p, 1, 100) <= 0) break;
    }
  }
  shutdown(fd_, SHUT_WR);
}

absl::StatusOr<std::string> ReadHead(Stream& stream, size_t max, bool* none_read) {
  std::string buf;
  if (none_read != nullptr) *none_read = false;
  char chunk[16384];
  while (true) {
    size_t end = FindHeadEnd(buf);
    if (end > 0) {
      stream.unread() = buf.substr(end) + stream.unread();
      buf.resize(end);
      return buf;
    }
    if (buf.size() > max) {
      return absl::ResourceExhaustedError("the message head is too long");
    }
    errno = 0;
    ssize_t n = stream.Read(chunk, sizeof(chunk));
    if (n <= 0) {
      // A server that closes a connection with bytes unread in it resets
      // it: that is an end too, not a failure.
      if (none_read != nullptr) *none_read = buf.empty() && (n == 0 || errno == ECONNRESET);
      return absl::UnavailableError(buf.empty() ? "the connection closed"
                                                : "the connection closed inside a message head");
    }
    buf.append(chunk, n);
  }
}

std::string Peek(Stream& stream, size_t n, std::chrono::milliseconds wait, char until) {
  if (!stream.unread().empty() || stream.tls()) return stream.unread();
  // MSG_PEEK leaves the bytes in the socket, where a TLS handshake that
  // follows must find them.
  auto deadline = std::chrono::steady_clock::now() + wait;
  std::string got(n, '\0');
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p = {stream.fd(), POLLIN, 0};
    if (left.count() <= 0 || Poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    ssize_t r = recv(stream.fd(), got.data(), n, MSG_PEEK | MSG_DONTWAIT);
    if (r <= 0) return "";
    bool enough = until != 0 ? memchr(got.data(), until, r) != nullptr || static_cast<size_t>(r) == n
                             : static_cast<size_t>(r) >= std::min<size_t>(n, 3);
    if (enough) {
      got.resize(r);
      return got;
    }
    SleepFor(std::chrono::milliseconds(5));
  }
  ssize_t r = recv(stream.fd(), got.data(), n, MSG_PEEK | MSG_DONTWAIT);
  got.resize(r > 0 ? r : 0);
  return got;
}

std::pair<uint64_t, uint64_t> Splice(Stream& a, Stream& b) {
  Stream* side[2] = {&a, &b};
  bool open[2] = {true, true};  // side i still sends
  uint64_t moved[2] = {0, 0};
  char buf[65536];
  while (open[0] || open[1]) {
    int ready = -1;
    for (int i = 0; i < 2; ++i) {
      if (open[i] && (side[i]->Pending() || !side[i]->unread().empty())) ready = i;
    }
    if (ready < 0) {
      pollfd p[2] = {{a.fd(), static_cast<short>(open[0] ? POLLIN : 0), 0},
                     {b.fd(), static_cast<short>(open[1] ? POLLIN : 0), 0}};
      int r = Poll(p, 2, static_cast<int>(kStreamTimeout.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;  // ten idle minutes
      for (int i = 0; i < 2 && ready < 0; ++i) {
        if (open[i] && p[i].revents != 0) ready = i;
      }
      if (ready < 0) continue;
    }
    Stream* from = side[ready];
    Stream* to = side[1 - ready];
    ssize_t n = from->Read(buf, sizeof(buf));
    if (n <= 0) {
      open[ready] = false;
      to->ShutdownWrite();
      if (n < 0) break;  // a broken side ends both directions
      continue;
    }
    moved[ready] += n;
    if (!to->WriteAll(absl::string_view(buf, n))) break;
  }
  return {moved[0], moved[1]};
}

bool CopyExactly(Stream& from, Stream& to, uint64_t n) {
  char buf[65536];
  while (n > 0) {
    ssize_t r = from.Read(buf, std::min<uint64_t>(sizeof(buf), n));
    if (r <= 0) return false;
    if (!to.WriteAll(absl::string_view(buf, r))) return false;
    n -= r;
  }
  return true;
}

uint64_t CopyUntilEnd(Stream& from, Stream& to) {
  char buf[65536];
  uint64_t total = 0;
  while (true) {
    ssize_t r = from.Read(buf, sizeof(buf));
    if (r <= 0) return total;
    if (!to.WriteAll(absl::string_view(buf, r))) return total;
    total += r;
  }
}

}  // namespace airlock::proxyd
