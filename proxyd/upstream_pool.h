// UpstreamPool keeps one sandbox's upstream connections that ended an HTTP
// exchange cleanly, so that the next request to the same destination skips
// the connect (and, inside intercepted TLS, the handshake). squid keeps its
// server connections the same way.
//
// What stays true: every request is still parsed, decided, checked against
// the protected ranges and given its credentials on its own before a byte
// of it goes out (http_exchange.cc); a kept connection only ever carries
// such requests, to the destination it was opened for (the key names the
// host, port, the address it was checked at or the operator's proxy, and
// whether it is TLS). Nothing is shared between sandboxes: each attachment
// has its own pool.
//
// Where it stops: whether a connection is clean to keep (the response's end
// known, both bodies carried whole) is the exchange's call. The pool only
// refuses, when one is taken, a connection idle past its limit or with
// anything waiting on it (a byte, an end, a TLS alert, bytes buffered past
// the last response): such a connection is closed, never reused.
#ifndef AIRLOCK_PROXYD_UPSTREAM_POOL_H_
#define AIRLOCK_PROXYD_UPSTREAM_POOL_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proxyd/stream.h"

namespace airlock::proxyd {

class UpstreamPool {
 public:
  struct Limits {
    // Idle connections kept per destination and in all (each is a
    // descriptor held open toward a server).
    size_t per_destination = 8;
    size_t total = 64;
    // A connection idle this long is closed instead of reused (servers
    // close idle connections too: nginx after 75 s, many sooner).
    std::chrono::milliseconds idle = std::chrono::seconds(15);
  };

  UpstreamPool() : UpstreamPool(Limits{}) {}
  explicit UpstreamPool(Limits limits) : limits_(limits) {}
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Take returns the most recently kept connection to `destination` that
  // is still quiet, or nullptr. Those found not quiet are closed on the
  // way.
  std::unique_ptr<Stream> Take(const std::string& destination);
  // Keep holds `upstream` for the next request to `destination`; it is
  // closed instead when it holds bytes read past its response (its socket
  // is looked at by Take), or the pool is full (per destination or in
  // all) or closed. Kept connections idle past the
  // limit are closed by the next Take or Keep of the sandbox (whatever its
  // destination), or by Close.
  void Keep(const std::string& destination, std::unique_ptr<Stream> upstream);
  // Close closes every kept connection; Keep closes what it gets from then
  // on (the attachment is stopping).
  void Close();

  // Connections kept now.
  size_t idle() const;

 private:
  struct Kept {
    std::unique_ptr<Stream> stream;
    std::chrono::steady_clock::time_point since;
  };

  // TakeExpired moves the connections idle past the limit to `into`
  // (under mu_; the caller closes them after unlocking).
  void TakeExpired(std::chrono::steady_clock::time_point now,
                   std::vector<std::unique_ptr<Stream>>* into);

  const Limits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::deque<Kept>> kept_;  // newest at the back
  size_t count_ = 0;
  bool closed_ = false;
};

// Quiet is true when nothing waits on `upstream`: no byte buffered past
// what was read, no TLS record decrypted and unread, and the socket has
// neither bytes nor an end of stream to give (a server that closed an idle
// connection, or one that sent more than its response).
bool Quiet(Stream& upstream);
// NothingBuffered is Quiet without asking the socket: no byte read past
// the response and no TLS record unread.
bool NothingBuffered(Stream& upstream);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_UPSTREAM_POOL_H_
