// A byte stream proxyd reads and writes: a connected socket, or a guest
// connection's pipe from the sandbox's mux (common/egress_pipe.h), with or
// without TLS on top. Both ends of a carried connection are Streams, so
// the HTTP code and the splice loop do not care which side is encrypted
// nor which is in memory.
// A read or write that must wait waits through Poll (fibers.h): on a
// handler's fiber, the loop serves other connections meanwhile. A stream
// that stays silent longer than its timeout ends. Its socket must be
// non-blocking when TLS runs on it on a fiber (a plain socket is read and
// written without blocking either way). A pipe's stream waits through a
// Waker the mux wakes: it must be used on a fiber of the mux's loop.
#ifndef AIRLOCK_PROXYD_STREAM_H_
#define AIRLOCK_PROXYD_STREAM_H_

#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/egress_pipe.h"
#include "proxyd/connections.h"
#include "proxyd/tls.h"

namespace airlock::proxyd {

// How long a stream may stay silent (a read or a write waiting) before it
// ends, unless set otherwise.
inline constexpr std::chrono::milliseconds kStreamTimeout = std::chrono::minutes(10);

class Stream {
 public:
  // Takes ownership of `fd`; with `sockets`, tracked there until closed.
  explicit Stream(int fd, SocketSet* sockets = nullptr) : fd_(fd), sockets_(sockets) {
    if (sockets_ != nullptr) sockets_->Add(fd_);
  }
  // A guest connection's end in memory (the stream is the pipe's owner;
  // it closes the pipe when it ends, unless released).
  explicit Stream(std::shared_ptr<EgressPipe> pipe);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // The socket; -1 for a pipe's stream.
  int fd() const { return fd_; }
  bool piped() const { return pipe_ != nullptr; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  bool tls() const { return ssl_ != nullptr; }
  // StartTls makes every later read and write go through `ssl` (already
  // handshaken on fd()).
  void StartTls(UniqueSsl ssl) { ssl_ = std::move(ssl); }

  // Read reads what is available, at most `n` bytes: > 0 bytes, 0 at end of
  // stream, -1 on error or timeout (errno ETIMEDOUT).
  ssize_t Read(char* buf, size_t n);
  bool WriteAll(absl::string_view data);
  // ExpectWait says the peer has nothing to send yet (it waits for what
  // was just written to it): the next Read waits for the socket before
  // reading, sparing a read that would find nothing.
  void ExpectWait() { wait_first_ = true; }
  // ShutdownWrite sends end of stream (TLS close_notify, then FIN).
  void ShutdownWrite();
  // Release gives up the plain socket (no TLS on it): it is no longer
  // tracked or closed here, and the stream is left without one. For a
  // pipe's stream: -1, and the pipe is given up the same way (its mux's
  // Replace takes it).
  int Release();
  // NewBio is an OpenSSL BIO on the stream's socket or pipe, for a TLS
  // session over it (whose waits go through Wait).
  BIO* NewBio();
  // Wait waits until the stream is ready for `events` (POLLIN, POLLOUT)
  // or `timeout_ms` (-1: the stream's timeout) passed: false then, with
  // errno ETIMEDOUT.
  bool Wait(short events, int timeout_ms = -1);
  // PeekSome copies up to `n` bytes that wait to be read without taking
  // them and without waiting: the count, 0 at the end, -1 (EAGAIN) when
  // none wait. Plain streams only (no TLS).
  ssize_t PeekSome(char* buf, size_t n);
  // Pending is true when TLS has decrypted bytes buffered (poll cannot see
  // them).
  bool Pending() const { return ssl_ != nullptr && SSL_pending(ssl_.get()) > 0; }
  // TlsLeftovers is true when TLS holds anything not yet read: decrypted
  // bytes, a record only partly processed, or the peer's close_notify.
  bool TlsLeftovers() const {
    return ssl_ != nullptr &&
           (SSL_pending(ssl_.get()) > 0 || SSL_has_pending(ssl_.get()) ||
            (SSL_get_shutdown(ssl_.get()) & SSL_RECEIVED_SHUTDOWN) != 0);
  }

  // Buffered bytes read past a message head, served before the socket.
  std::string& unread() { return unread_; }

 private:
  // WaitFor is Wait with the stream's timeout.
  bool WaitFor(short events) { return Wait(events); }
  // Ready says whether a pipe's stream is ready for `events` now.
  bool Ready(short events) const;

  friend int WaitStreams(Stream* const* streams, const short* events, short* ready, size_t n,
                         int timeout_ms);

  int fd_;
  SocketSet* sockets_;
  std::shared_ptr<EgressPipe> pipe_;
  std::shared_ptr<Waker> waker_;  // a pipe's, woken by its mux
  std::chrono::milliseconds timeout_ = kStreamTimeout;
  UniqueSsl ssl_;
  std::string unread_;
  bool wait_first_ = false;  // ExpectWait
  bool write_shut_ = false;
};

// WaitStreams waits until one of `streams` is ready for its `events`
// (POLLIN, POLLOUT; 0 leaves it out) or `timeout_ms` (-1: no limit)
// passed, and says in `ready` which: how many are ready, 0 at the time
// limit. At most four streams, and at most one of them a pipe's.
int WaitStreams(Stream* const* streams, const short* events, short* ready, size_t n,
                int timeout_ms);

// ReadHead reads until a complete message head ("...\r\n\r\n") and returns
// it; bytes after it stay in stream.unread(). Errors: the stream ended
// (UNAVAILABLE) or the head passed `max` bytes (RESOURCE_EXHAUSTED). With
// `none_read`, set to whether the stream ended (an end of stream or a
// reset, not another error or a timeout) before a byte.
absl::StatusOr<std::string> ReadHead(Stream& stream, size_t max, bool* none_read = nullptr);

// Peek returns up to `n` first bytes of a plain stream without consuming
// them, waiting at most `wait` for at least 3 (enough to tell TLS, HTTP
// and the rest apart); what is there when the wait ends (maybe nothing).
// With `until`, it waits (up to `wait`) for that byte to appear instead.
std::string Peek(Stream& stream, size_t n, std::chrono::milliseconds wait, char until = 0);

// Splice copies both ways until both directions have ended; an end of
// stream on one side is passed on as ShutdownWrite to the other. Returns
// the bytes copied a->b and b->a.
std::pair<uint64_t, uint64_t> Splice(Stream& a, Stream& b);

// CopyExactly copies `n` bytes from `from` to `to`.
bool CopyExactly(Stream& from, Stream& to, uint64_t n);

// CopyUntilEnd copies from `from` to `to` as bytes arrive, until `from`
// ends; each read is written at once, so streamed responses are not held.
uint64_t CopyUntilEnd(Stream& from, Stream& to);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_STREAM_H_
