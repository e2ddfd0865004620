#include "proxyd/upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/policy/rules.h"
#include "proxyd/fibers.h"

namespace airlock::proxyd {

namespace {

struct Range {
  Address base;
  int prefix;
};

Range V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, int prefix) {
  Range r{{}, 96 + prefix};
  r.base[10] = r.base[11] = 0xff;
  r.base[12] = a;
  r.base[13] = b;
  r.base[14] = c;
  r.base[15] = d;
  return r;
}

Range V6(std::initializer_list<uint8_t> head, int prefix) {
  Range r{{}, prefix};
  int i = 0;
  for (uint8_t b : head) r.base[i++] = b;
  return r;
}

bool InRange(const Address& a, const Range& r) {
  int full = r.prefix / 8, rest = r.prefix % 8;
  if (memcmp(a.data(), r.base.data(), full) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (r.base[full] & mask);
}

const std::vector<Range>& ProtectedRanges() {
  static const std::vector<Range> ranges = {
      V4(0, 0, 0, 0, 8),       V4(10, 0, 0, 0, 8),     V4(100, 64, 0, 0, 10),
      V4(127, 0, 0, 0, 8),     V4(169, 254, 0, 0, 16), V4(172, 16, 0, 0, 12),
      V4(192, 0, 0, 0, 24),    V4(192, 0, 2, 0, 24),   V4(192, 168, 0, 0, 16),
      V4(198, 18, 0, 0, 15),   V4(198, 51, 100, 0, 24), V4(203, 0, 113, 0, 24),
      V4(224, 0, 0, 0, 4),     V4(240, 0, 0, 0, 4),
      V6({}, 127),                              // :: and ::1
      V6({0xfc}, 7),                            // unique local
      V6({0xfe, 0x80}, 10),                     // link-local
      V6({0xff}, 8),                            // multicast
      V6({0x00, 0x64, 0xff, 0x9b}, 96),         // NAT64 (embeds IPv4)
      V6({0x20, 0x01, 0x0d, 0xb8}, 32),         // documentation
      V6({0x20, 0x02}, 16),                     // 6to4 (embeds IPv4)
  };
  return ranges;
}

}  // namespace

bool IsProtected(const Address& addr) {
  for (const Range& r : ProtectedRanges()) {
    if (InRange(addr, r)) return true;
  }
  return false;
}

bool IsSynthetic(const Address& addr) { return InRange(addr, V4(198, 18, 0, 0, 15)); }

std::string AddressText(const Address& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (memcmp(a.data(), kMapped, 12) == 0) {
    inet_ntop(AF_INET, a.data() + 12, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, a.data(), buf, sizeof(buf));
  }
  return buf;
}

std::array<uint8_t, 4> SyntheticNames::AddressFor(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  uint32_t index;
  if (it != by_name_.end()) {
    index = it->second;
  } else {
    // 2^17 - 2 names; after that the oldest addresses are reused in turn.
    if (names_.size() < 131070) {
      names_.push_back(name);
      index = static_cast<uint32_t>(names_.size());
    } else {
      index = next_reuse_ + 1;
      next_reuse_ = (next_reuse_ + 1) % 131070;
      by_name_.erase(names_[index - 1]);
      names_[index - 1] = name;
    }
    by_name_[name] = index;
  }
  uint32_t host = (198u << 24) | (18u << 16) | index;
  return {static_cast<uint8_t>(host >> 24), static_cast<uint8_t>(host >> 16),
          static_cast<uint8_t>(host >> 8), static_cast<uint8_t>(host)};
}

std::string SyntheticNames::NameOf(const Address& addr) const {
  if (!IsSynthetic(addr)) return "";
  uint32_t index = ((addr[13] & 1u) << 16) | (addr[14] << 8) | addr[15];
  std::lock_guard<std::mutex> lock(mu_);
  if (index == 0 || index > names_.size()) return "";
  return names_[index - 1];
}

namespace {

absl::StatusOr<Address> SystemLookup(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = 0;
  // A lookup may take seconds: a handler's fiber waits for it aside.
  RunBlocking([&] { rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); });
  if (rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  Address out{};
  bool found = false;
  for (int pass = 0; pass < 2 && !found; ++pass) {
    for (addrinfo* ai = res; ai != nullptr && !found; ai = ai->ai_next) {
      if (pass == 0 && ai->ai_family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(ai->ai_addr);
        out = {};
        out[10] = out[11] = 0xff;
        memcpy(out.data() + 12, &sin->sin_addr, 4);
        found = true;
      } else if (pass == 1 && ai->ai_family == AF_INET6) {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(ai->ai_addr);
        memcpy(out.data(), &sin6->sin6_addr, 16);
        found = true;
      }
    }
  }
  freeaddrinfo(res);
  if (!found) return absl::NotFoundError(absl::StrCat("no address for ", host));
  return out;
}

}  // namespace

absl::StatusOr<Resolver> Resolver::Make(const std::vector<std::string>& static_map, Lookup lookup,
                                        std::function<Clock::time_point()> now) {
  Resolver r;
  r.lookup_ = lookup ? std::move(lookup) : SystemLookup;
  r.now_ = std::move(now);
  for (const std::string& entry : static_map) {
    size_t eq = entry.find('=');
    Address a;
    if (eq == std::string::npos || eq == 0 ||
        !airlock::policy::ParseAddress(entry.substr(eq + 1), &a)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resolve entry \"", entry, "\" must be NAME=ADDRESS (e.g. api.example.test=127.0.0.1)"));
    }
    r.static_map_[absl::AsciiStrToLower(entry.substr(0, eq))] = a;
  }
  return r;
}

absl::StatusOr<Resolved> Resolver::Resolve(const std::string& host) const {
  Resolved out;
  auto it = static_map_.find(host);
  if (it != static_map_.end()) {
    out.address = it->second;
    out.from_static_map = true;
    return out;
  }
  if (airlock::policy::ParseAddress(host, &out.address)) return out;
  std::string key = absl::AsciiStrToLower(host);
  {
    std::lock_guard<std::mutex> lock(kept_->mu);
    auto k = kept_->answers.find(key);
    if (k != kept_->answers.end() && now_() < k->second.second) {
      out.address = k->second.first;
      return out;
    }
  }
  auto address = lookup_(host);
  if (!address.ok()) return address.status();
  {
    std::lock_guard<std::mutex> lock(kept_->mu);
    if (kept_->answers.size() >= kMaxKept) kept_->answers.clear();
    kept_->answers[key] = {*address, now_() + kKeepFor};
  }
  out.address = *address;
  return out;
}

std::string Destination::PoolKey(bool tls) const {
  return absl::StrCat(tls ? "tls " : "tcp ", host, ":", port, " at ",
                      via_proxy ? "proxy" : (resolved ? AddressText(address) : "-"));
}

absl::StatusOr<int> ConnectTo(const Address& addr, uint16_t port, std::chrono::seconds timeout) {
  sockaddr_storage ss{};
  socklen_t len;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (memcmp(addr.data(), kMapped, 12) == 0) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    memcpy(&sin->sin_addr, addr.data() + 12, 4);
    len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    memcpy(&sin6->sin6_addr, addr.data(), 16);
    len = sizeof(sockaddr_in6);
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  std::string where = absl::StrCat(AddressText(addr), " port ", port);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p = {fd, POLLOUT, 0};
    rc = Poll(&p, 1, static_cast<int>(timeout.count() * 1000));
    if (rc == 0) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat("connecting to ", where, " timed out"));
    }
    int err = 0;
    socklen_t elen = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    errno = err;
    rc = err == 0 ? 0 : -1;
  }
  if (rc != 0) {
    std::string err = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", where, ": ", err));
  }
  // It stays non-blocking: every wait on it goes through Poll (fibers.h).
  // A request head and its body go out as separate writes: without this,
  // Nagle holds the second until the first is acknowledged.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

absl::Status ProxyTunnel(int fd, const std::string& proxy, const std::string& host, uint16_t port,
                         std::chrono::seconds timeout) {
  std::string authority = absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                                       : absl::StrCat(host, ":", port);
  std::string req = absl::StrCat("CONNECT ", authority, " HTTP/1.1\r\nHost: ", authority,
                                 "\r\nUser-Agent: airlock-proxyd\r\n\r\n");
  for (size_t off = 0; off < req.size();) {
    ssize_t n = send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p = {fd, POLLOUT, 0};
      if (Poll(&p, 1, static_cast<int>(timeout.count() * 1000)) > 0) continue;
      errno = ETIMEDOUT;
    }
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot send CONNECT to upstream proxy ", proxy, ": ", strerror(errno)));
    }
    off += n;
  }
  // The answer's head, read byte by byte so nothing of the tunnel is taken.
  std::string head;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (head.size() < 16384 && head.find("\r\n\r\n") == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p = {fd, POLLIN, 0};
    if (left.count() <= 0 || Poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("upstream proxy ", proxy, " did not answer CONNECT ", authority));
    }
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("upstream proxy ", proxy,
                                                 " closed the connection on CONNECT ", authority));
    }
    head += c;
  }
  std::string status = head.substr(0, head.find("\r\n"));
  // "HTTP/1.1 200 Connection established"
  size_t sp = status.find(' ');
  bool ok = absl::StartsWith(status, "HTTP/1.") && sp != std::string::npos &&
            sp + 1 < status.size() && status[sp + 1] == '2';
  if (!ok) {
    return absl::UnavailableError(absl::StrCat("upstream proxy ", proxy, " answered CONNECT ",
                                               authority, " with ",
                                               sp == std::string::npos ? status : status.substr(sp + 1)));
  }
  return absl::OkStatus();
}

}  // namespace airlock::proxyd
