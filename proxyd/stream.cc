#include "proxyd/stream.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>

#include <algorithm>

#include "proxyd/fibers.h"
#include "proxyd/http.h"

namespace airlock::proxyd {

namespace {

// A BIO over a guest connection's pipe, for TLS with the sandbox's client:
// reads and writes that would wait say "retry", and the session's caller
// waits through Stream::Wait.
int PipeBioWrite(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  auto* pipe = static_cast<EgressPipe*>(BIO_get_data(b));
  ssize_t r = pipe->Write(data, static_cast<size_t>(len));
  if (r >= 0) return static_cast<int>(r);
  if (errno == EAGAIN) BIO_set_retry_write(b);
  return -1;
}

int PipeBioRead(BIO* b, char* out, int len) {
  BIO_clear_retry_flags(b);
  auto* pipe = static_cast<EgressPipe*>(BIO_get_data(b));
  ssize_t r = pipe->Read(out, static_cast<size_t>(len));
  if (r >= 0) return static_cast<int>(r);
  if (errno == EAGAIN) BIO_set_retry_read(b);
  return -1;
}

long PipeBioCtrl(BIO*, int cmd, long, void*) {
  // Nothing is buffered here: a flush is done at once.
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int PipeBioCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* PipeBioMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "egress pipe");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, PipeBioWrite);
    BIO_meth_set_read(m, PipeBioRead);
    BIO_meth_set_ctrl(m, PipeBioCtrl);
    BIO_meth_set_create(m, PipeBioCreate);
    return m;
  }();
  return method;
}

}  // namespace

Stream::Stream(std::shared_ptr<EgressPipe> pipe)
    : fd_(-1), sockets_(nullptr), pipe_(std::move(pipe)), waker_(std::make_shared<Waker>()) {
  // The mux wakes this stream's fiber (its wait below) without a system
  // call: both run on one loop.
  pipe_->SetOwnerWake([waker = waker_] { waker->Wake(); });
}

Stream::~Stream() {
  ssl_.reset();
  if (pipe_ != nullptr) pipe_->Close();
  if (sockets_ != nullptr && fd_ >= 0) sockets_->Remove(fd_);
  if (fd_ >= 0) close(fd_);
}

int Stream::Release() {
  int fd = fd_;
  if (sockets_ != nullptr && fd_ >= 0) sockets_->Remove(fd_);
  fd_ = -1;
  if (pipe_ != nullptr) {
    pipe_->SetOwnerWake(nullptr);
    pipe_.reset();
  }
  write_shut_ = true;
  return fd;
}

BIO* Stream::NewBio() {
  if (pipe_ == nullptr) return BIO_new_socket(fd_, BIO_NOCLOSE);
  const BIO_METHOD* method = PipeBioMethod();
  BIO* b = method == nullptr ? nullptr : BIO_new(method);
  if (b != nullptr) BIO_set_data(b, pipe_.get());
  return b;
}

bool Stream::Ready(short events) const {
  return ((events & POLLIN) != 0 && pipe_->Readable()) ||
         ((events & POLLOUT) != 0 && pipe_->Writable());
}

bool Stream::Wait(short events, int timeout_ms) {
  Stream* self = this;
  short ready = 0;
  int limit = timeout_ms < 0 ? static_cast<int>(timeout_.count()) : timeout_ms;
  if (WaitStreams(&self, &events, &ready, 1, limit) > 0) return true;
  errno = ETIMEDOUT;
  return false;
}

ssize_t Stream::PeekSome(char* buf, size_t n) {
  if (pipe_ != nullptr) return pipe_->Peek(buf, n);
  return recv(fd_, buf, n, MSG_PEEK | MSG_DONTWAIT);
}

int WaitStreams(Stream* const* streams, const short* events, short* ready, size_t n,
                int timeout_ms) {
  auto deadline = timeout_ms < 0 ? std::chrono::steady_clock::time_point::max()
                                 : std::chrono::steady_clock::now() +
                                       std::chrono::milliseconds(timeout_ms);
  pollfd fds[4];
  size_t at[4];
  if (n > 4) n = 4;
  while (true) {
    Stream* piped = nullptr;
    int count = 0;
    nfds_t nfds = 0;
    for (size_t i = 0; i < n; ++i) {
      ready[i] = 0;
      if (events[i] == 0) continue;
      Stream* s = streams[i];
      if (s->pipe_ != nullptr) {
        piped = s;
        if (s->Ready(events[i])) {
          ready[i] = events[i];
          ++count;
        }
        continue;
      }
      fds[nfds] = {s->fd_, events[i], 0};
      at[nfds++] = i;
    }
    // A pipe ready now is said at once (no system call for the sockets).
    if (count > 0) return count;
    int left = -1;
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                             std::chrono::steady_clock::now());
      left = static_cast<int>(std::max<int64_t>(0, ms.count()));
    }
    int r;
    if (piped != nullptr && left != 0) {
      // Ends at the mux's wake too, then the pipe is looked at again.
      r = piped->waker_->Poll(fds, nfds, left);
    } else {
      r = Poll(fds, nfds, left);
    }
    if (r < 0 && errno != EINTR) return -1;
    for (nfds_t k = 0; r > 0 && k < nfds; ++k) {
      if (fds[k].revents != 0) {
        ready[at[k]] = fds[k].revents;
        ++count;
      }
    }
    if (count > 0) return count;
    if (left == 0) return 0;
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
    ssize_t r = pipe_ != nullptr ? pipe_->Read(buf, n) : recv(fd_, buf, n, MSG_DONTWAIT);
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
    ssize_t r = pipe_ != nullptr ? pipe_->Write(data.data(), data.size())
                                 : send(fd_, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
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
      if (!Wait(POLLOUT, 100)) break;
    }
  }
  if (pipe_ != nullptr) {
    pipe_->ShutdownWrite();
  } else {
    shutdown(fd_, SHUT_WR);
  }
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
    if (left.count() <= 0 || !stream.Wait(POLLIN, static_cast<int>(left.count()))) break;
    ssize_t r = stream.PeekSome(got.data(), n);
    if (r <= 0) return "";
    bool enough = until != 0 ? memchr(got.data(), until, r) != nullptr || static_cast<size_t>(r) == n
                             : static_cast<size_t>(r) >= std::min<size_t>(n, 3);
    if (enough) {
      got.resize(r);
      return got;
    }
    SleepFor(std::chrono::milliseconds(5));
  }
  ssize_t r = stream.PeekSome(got.data(), n);
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
      short events[2] = {static_cast<short>(open[0] ? POLLIN : 0),
                         static_cast<short>(open[1] ? POLLIN : 0)};
      short got[2] = {0, 0};
      int r = WaitStreams(side, events, got, 2, static_cast<int>(kStreamTimeout.count()));
      if (r <= 0) break;  // ten idle minutes
      for (int i = 0; i < 2 && ready < 0; ++i) {
        if (open[i] && got[i] != 0) ready = i;
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
