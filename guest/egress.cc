#include "guest/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/fd_io.h"
#include "common/paths.h"

namespace airlock::guest {

namespace {

using airlock::agent::v1::EgressFrame;
using airlock::agent::v1::EgressFrames;
using airlock::agent::v1::EgressVia;
using std::chrono::seconds;
using std::chrono::steady_clock;

// A DNS query not answered within this long is forgotten (the resolver
// retries on its own).
constexpr auto kPendingTimeout = seconds(15);
// Tunnel messages the mux's loop takes in one turn before it writes out
// and credits what they brought (then it takes more without waiting).
constexpr int kMessagesPerTurn = 16;

absl::StatusOr<int> ListenOn(int type, const std::string& address, uint16_t port,
                                   uint16_t* bound) {
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (type == SOCK_STREAM && listen(fd, 256) != 0)) {
    std::string err = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ":", port, ": ", err));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound = ntohs(addr.sin_port);
  return fd;
}

absl::Status WriteFile(const std::string& path, const std::string& content) {
  if (absl::Status s = MakeDirs(path.substr(0, path.rfind('/')), 0755); !s.ok()) return s;
  return ReplaceFile(path, content, 0644);
}

}  // namespace

void ResetAndClose(int fd) {
  linger l = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

absl::Status InstallCa(const std::string& root, const std::string& pem) {
  if (absl::Status s = WriteFile(root + kCaPath, pem); !s.ok()) return s;
  std::string bundle = ReadFileToString(root + kSystemBundle);
  if (absl::StrContains(bundle, pem)) return absl::OkStatus();
  if (!bundle.empty() && bundle.back() != '\n') bundle.push_back('\n');
  return WriteFile(root + kSystemBundle, bundle + pem);
}

absl::Status WriteEgressConfig(const std::string& root) {
  // resolv.conf may be a symlink into a resolver the guest does not run.
  unlink((root + "/etc/resolv.conf").c_str());
  if (absl::Status s = WriteFile(root + "/etc/resolv.conf",
                                 absl::StrCat("# written by airlock-agent: DNS goes through "
                                              "the sandbox policy\nnameserver ",
                                              kDnsAddress, "\n"));
      !s.ok()) {
    return s;
  }
  // /etc/environment may hold the template's own lines: keep those, replace
  // ours.
  std::string environment, profile = "# written by airlock-agent: sandbox egress\n";
  for (absl::string_view line :
       absl::StrSplit(ReadFileToString(root + "/etc/environment"), '\n', absl::SkipEmpty())) {
    bool ours = false;
    for (const char* e : kEgressEnvironment) {
      absl::string_view key(e, strchr(e, '=') - e + 1);
      ours = ours || absl::StartsWith(line, key);
    }
    if (!ours) absl::StrAppend(&environment, line, "\n");
  }
  for (const char* e : kEgressEnvironment) {
    absl::StrAppend(&environment, e, "\n");
    absl::StrAppend(&profile, "export ", e, "\n");
  }
  if (absl::Status s = WriteFile(root + "/etc/environment", environment); !s.ok()) return s;
  return WriteFile(root + "/etc/profile.d/airlock-egress.sh", profile);
}

EgressService::~EgressService() {
  std::shared_ptr<EgressMux> mux;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    mux.swap(mux_);
    if (tunnel_ != nullptr) tunnel_->Shutdown();
  }
  if (mux) mux->Close();
  for (int fd : {transparent_fd_, forward_fd_, dns_fd_, dns_any_fd_}) {
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
  for (int fd : {transparent_fd_, forward_fd_, dns_fd_, dns_any_fd_}) {
    if (fd >= 0) close(fd);
  }
}

absl::Status EgressService::Listen(uint16_t transparent_port, uint16_t forward_port,
                                   const std::string& dns_address, uint16_t dns_port,
                                   bool forwarded) {
  auto t = ListenOn(SOCK_STREAM, forwarded ? "0.0.0.0" : "127.0.0.1", transparent_port,
                          &transparent_port_);
  if (!t.ok()) return t.status();
  transparent_fd_ = *t;
  auto f = ListenOn(SOCK_STREAM, "127.0.0.1", forward_port, &forward_port_);
  if (!f.ok()) return f.status();
  forward_fd_ = *f;
  if (!dns_address.empty()) {
    auto d = ListenOn(SOCK_DGRAM, dns_address, dns_port, &dns_port_);
    if (!d.ok()) return d.status();
    dns_fd_ = *d;
    threads_.emplace_back([this] { DnsLoop(dns_fd_); });
    if (forwarded) {
      // Both sockets reuse the address, so the more specific one keeps the
      // guest's own queries and this one gets the redirected ones.
      uint16_t same = 0;
      auto any = ListenOn(SOCK_DGRAM, "0.0.0.0", dns_port_, &same);
      if (!any.ok()) return any.status();
      dns_any_fd_ = *any;
      threads_.emplace_back([this] { DnsLoop(dns_any_fd_); });
    }
  }
  threads_.emplace_back([this] { AcceptLoop(transparent_fd_, agent::v1::EGRESS_TRANSPARENT); });
  threads_.emplace_back([this] { AcceptLoop(forward_fd_, agent::v1::EGRESS_FORWARD); });
  return absl::OkStatus();
}

void EgressService::AcceptLoop(int listen_fd, EgressVia via) {
  while (true) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      continue;
    }
    // What proxyd sends back arrives in pieces (a response head, then its
    // body): each goes out at once, not held back by Nagle.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    EgressFrame open;
    auto* c = open.mutable_open();
    c->set_via(via);
    if (via == agent::v1::EGRESS_TRANSPARENT) {
      // Where the process was connecting before the redirect. Without it
      // (no redirect happened) there is nowhere to carry the connection.
      sockaddr_in orig{};
      socklen_t len = sizeof(orig);
      if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len) != 0) {
        ResetAndClose(fd);
        continue;
      }
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &orig.sin_addr, text, sizeof(text));
      c->set_address(text);
      c->set_port(ntohs(orig.sin_port));
    }
    std::shared_ptr<EgressMux> mux;
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      mux = mux_;
      id = next_id_;
      next_id_ += 2;
    }
    // No tunnel: nowhere to go, and a reset says so at once.
    if (mux == nullptr) {
      ResetAndClose(fd);
      continue;
    }
    mux->Open(id, fd, &open);
  }
}

void EgressService::DnsLoop(int fd) {
  char buf[4096];
  while (true) {
    PendingDns from;
    from.fd = fd;
    from.from_len = sizeof(from.from);
    ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from.from),
                         &from.from_len);
    if (n < 0 && errno == EINTR) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (n <= 0) continue;
    ExpireDns();
    from.since = steady_clock::now();
    EgressFrame q;
    std::shared_ptr<EgressMux> mux;
    {
      std::lock_guard<std::mutex> lock(mu_);
      mux = mux_;
      if (mux == nullptr) continue;  // no tunnel: no answer (the resolver retries)
      q.set_id(next_id_);
      next_id_ += 2;
      dns_[q.id()] = from;
    }
    q.set_dns_query(buf, n);
    uint64_t id = q.id();
    if (!mux->Post(std::move(q))) {
      std::lock_guard<std::mutex> lock(mu_);
      dns_.erase(id);
    }
  }
}

void EgressService::ExpireDns() {
  auto cutoff = steady_clock::now() - kPendingTimeout;
  std::lock_guard<std::mutex> lock(mu_);
  // Ids rise with time: the oldest queries come first.
  while (!dns_.empty() && dns_.begin()->second.since < cutoff) dns_.erase(dns_.begin());
}

void EgressService::AnswerDns(uint64_t id, const std::string& packet) {
  PendingDns to;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = dns_.find(id);
    if (it == dns_.end()) return;  // expired, or not a query of ours
    to = it->second;
    dns_.erase(it);
  }
  sendto(to.fd, packet.data(), packet.size(), 0, reinterpret_cast<const sockaddr*>(&to.from),
         to.from_len);
}

void EgressService::Serve(EgressTransport* tunnel) {
  EgressFrames in;
  if (!tunnel->Read(&in)) return;
  if (!in.start().ca_certificate_pem().empty()) {
    if (absl::Status s = InstallCa(root_, in.start().ca_certificate_pem()); !s.ok()) {
      // proxyd never hears the tunnel is live: its wait for the answer
      // ends (kTunnelAnswerTimeout) and it opens the tunnel again.
      std::cerr << "egress: cannot install the interception CA: " << s.message() << "\n";
      return;
    }
  }
  // The mux is live before the empty message that says the tunnel is (so
  // a connection made the moment proxyd hears it is carried, not reset),
  // but sends nothing until that message is written: it comes first.
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  auto mux = std::make_shared<EgressMux>(
      [tunnel, gate](const EgressFrames& batch) {
        {
          std::unique_lock<std::mutex> lock(gate->mu);
          gate->cv.wait(lock, [&] { return gate->open; });
        }
        // A tunnel whose write failed is over: its end wakes the watch
        // below (a virtio port may never say so by itself).
        if (tunnel->Write(batch)) return true;
        tunnel->Shutdown();
        return false;
      },
      in.start().max_window());
  std::shared_ptr<EgressMux> previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    previous.swap(mux_);
    if (tunnel_ != nullptr) tunnel_->Shutdown();
    mux_ = mux;
    tunnel_ = tunnel;
    dns_.clear();
  }
  EgressFrames answer;
  answer.mutable_start()->set_max_window(kEgressMaxWindow);
  bool live = tunnel->Write(answer);
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
  }
  gate->cv.notify_all();
  if (!live) tunnel->Shutdown();  // the watch below ends at once
  if (previous) previous->Close();
  // The mux's own loop reads the tunnel (Watch): a message's frames are
  // applied, and their bytes written to the guest's sockets, on the
  // thread that read it, with no hand-off to another. This thread waits
  // for the tunnel's end.
  std::promise<void> ended;
  std::future<void> end = ended.get_future();
  bool watched = mux->Watch(
      {tunnel->fd(), tunnel->shutdown_fd()},
      [this, tunnel, m = mux.get(), &ended, message = EgressFrames()]() mutable {
        // A bounded share per turn, so the mux writes out and credits
        // between them (and never holds all that is in flight at once).
        for (int i = 0; i < kMessagesPerTurn; ++i) {
          switch (tunnel->TryRead(&message)) {
            case EgressTransport::Got::kNothing:
              return EgressMux::Watched::kIdle;
            case EgressTransport::Got::kEnded:
              ended.set_value();
              return EgressMux::Watched::kDone;
            case EgressTransport::Got::kMessage:
              break;
          }
          for (EgressFrame& f : *message.mutable_frames()) {
            if (f.kind_case() == EgressFrame::kDnsAnswer) {
              AnswerDns(f.id(), f.dns_answer());
            } else if (!m->Deliver(std::move(f))) {
              // The mux holds too much the peer sent (or stops): the
              // tunnel ends rather than grow it.
              tunnel->Shutdown();
              ended.set_value();
              return EgressMux::Watched::kDone;
            }
          }
        }
        return EgressMux::Watched::kPending;
      });
  if (watched) end.wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (mux_ == mux) mux_ = nullptr;
    if (tunnel_ == tunnel) tunnel_ = nullptr;
  }
  // The tunnel is over: its writes fail from here, so the mux stops
  // promptly and resets the connections it carried.
  tunnel->Shutdown();
  mux->Stop();
}

}  // namespace airlock::guest
