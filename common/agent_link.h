// A host daemon's connection to one of a sandbox's agent ports: a Unix
// socket to the hypervisor's end of the virtio-serial port, opened with
// the hello handshake (common/channel_hello.h). vmmd's agent port hands it
// to gRPC as a channel of its own (AgentLink); proxyd's egress port carries
// the raw tunnel (ConnectAgentPort, common/egress_transport.h). When
// that connection breaks, the next call makes a new one; gRPC never
// reconnects behind our back, which the byte stream could not tell apart.
#ifndef AIRLOCK_COMMON_AGENT_LINK_H_
#define AIRLOCK_COMMON_AGENT_LINK_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace airlock {

class AgentLink {
 public:
  // `first_resend`: how long the first hello waits for its answer before
  // it is said again (each wait then doubles, up to 3 s; ConnectAgentPort).
  explicit AgentLink(std::string socket_path,
                     std::chrono::milliseconds first_resend = std::chrono::seconds(3))
      : socket_path_(std::move(socket_path)), first_resend_(first_resend) {}

  // Channel returns the connected channel, connecting first when there is
  // none (at first use, or after Reset).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(std::chrono::milliseconds timeout);

  // Reset drops the current connection (after a call saw it broken).
  void Reset();

  // Relocate names the socket's new path (its directory was renamed: a
  // warm VM became a sandbox); the connection, if any, stays.
  void Relocate(std::string socket_path);

 private:
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(std::chrono::milliseconds timeout);

  std::string socket_path_;
  std::chrono::milliseconds first_resend_;
  std::mutex mu_;
  std::shared_ptr<grpc::Channel> channel_;
};

// ConnectJailSocket connects to the Unix socket at `path`, whose directory
// belongs to a jailed QEMU: never through a symlink (that QEMU could put one
// to another sandbox's socket, or a daemon's, in its place). The path is
// opened without following one, checked to be a socket, and connected to
// through that open file. UNAVAILABLE when there is nothing to connect to
// (yet), FAILED_PRECONDITION when `path` is not a socket.
absl::StatusOr<int> ConnectJailSocket(const std::string& path);

// ConnectAgentPort connects to the hypervisor's end of an agent port at
// `socket_path` (never through a symlink) and completes the hello: the
// returned descriptor (blocking, the caller's to close) carries what the
// agent sends next and nothing before it. A hello not answered within
// `first_resend` is said again, then after twice as long, up to every 3 s.
// A short first wait is for a guest just restored, whose agent may take the
// first hello for bytes of the snapshot VM's last connection: an agent of
// this release drops the hellos it did not answer, an older one would take
// a second hello for the start of the stream.
absl::StatusOr<int> ConnectAgentPort(
    const std::string& socket_path, std::chrono::milliseconds timeout,
    std::chrono::milliseconds first_resend = std::chrono::seconds(3));

}  // namespace airlock

#endif  // AIRLOCK_COMMON_AGENT_LINK_H_
