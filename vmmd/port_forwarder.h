// Published ports: a TCP listener on the host per mapping, each accepted
// connection carried to 127.0.0.1:<port> in the guest over the agent
// channel (the guest has no network interface for it to take).
#ifndef AIRLOCK_VMMD_PORT_FORWARDER_H_
#define AIRLOCK_VMMD_PORT_FORWARDER_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::vmmd {

// ValidatePortMapping checks a mapping and fills its defaults (host_ip
// 127.0.0.1, protocol tcp).
absl::Status ValidatePortMapping(airlock::vmm::v1::PortMapping* m);

// SameMapping says whether two mappings name the same published port.
bool SameMapping(const airlock::vmm::v1::PortMapping& a, const airlock::vmm::v1::PortMapping& b);

// ReserveHostPort checks that `m`'s host address and port can be bound now
// (choosing a free port when it is 0) and returns the mapping with the port
// filled in. ALREADY_EXISTS when the port is taken.
absl::StatusOr<airlock::vmm::v1::PortMapping> ReserveHostPort(const airlock::vmm::v1::PortMapping& m);

class PortForwarder {
 public:
  // ChannelFn gives the agent channel of the sandbox for a new connection.
  using ChannelFn = std::function<absl::StatusOr<std::shared_ptr<grpc::Channel>>()>;

  PortForwarder();
  ~PortForwarder();

  // Open listens for `m` (binding an ephemeral port when host_port is 0) and
  // returns the mapping with the port bound. ALREADY_EXISTS (with the
  // address) when the host port is taken.
  absl::StatusOr<airlock::vmm::v1::PortMapping> Open(const std::string& sandbox,
                                                     const airlock::vmm::v1::PortMapping& m,
                                                     ChannelFn channel);
  // OpenResponder listens on `m`'s host port and answers every connection
  // with `reply`, then closes it (a stopped clone-mode sandbox tells git
  // why it cannot fetch). The host port must be set.
  absl::Status OpenResponder(const std::string& sandbox, const airlock::vmm::v1::PortMapping& m,
                             std::string reply);
  // Close stops listening for `m`; open connections are cut.
  void Close(const std::string& sandbox, const airlock::vmm::v1::PortMapping& m);
  // CloseAll stops every listener of the sandbox.
  void CloseAll(const std::string& sandbox);

 private:
  struct Listener;
  absl::StatusOr<airlock::vmm::v1::PortMapping> Listen(const std::string& sandbox,
                                                       const airlock::vmm::v1::PortMapping& m,
                                                       ChannelFn channel, std::string reply);
  std::mutex mu_;
  std::multimap<std::string, std::unique_ptr<Listener>> listeners_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_PORT_FORWARDER_H_
