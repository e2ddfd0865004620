// airlock-agent: the guest side of a sandbox. As PID 1 of the initramfs it
// boots the guest (modules, root disk, switch root) and serves the agent API
// to vmmd over the sandbox's virtio-serial port. Run as an ordinary process
// with --listen=unix:PATH it serves the same API on a Unix socket, which
// tests use to exercise exec and files without a VM.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/console_markers.h"
#include "common/malloc_tuning.h"
#include "guest/agent_service.h"
#include "guest/boot.h"
#include "guest/boot_watch.h"
#include "guest/users.h"
#include "guest/channel.h"
#include "guest/egress.h"
#include "guest/grpc_clock.h"
#include "guest/identity.h"
#include "guest/net_setup.h"

namespace {

using airlock::guest::Console;

[[noreturn]] void Fail(const absl::Status& s) {
  Console(absl::StrCat(airlock::kAgentFailedMarker, ": ", s.message()));
  airlock::guest::PowerOff();
}

std::unique_ptr<grpc::Server> BuildServer(grpc::Service* service,
                                          const std::string& listen) {
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  if (!listen.empty()) builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

int RunAsInit() {
  // First: a console that ends before this line hung in the kernel.
  Console(airlock::kAgentStartedMarker);
  signal(SIGPIPE, SIG_IGN);
  // The egress tunnel's batches are made and freed many times a second.
  airlock::KeepBulkBuffersMapped();
  if (absl::Status s = airlock::guest::MountEarly(); !s.ok()) Fail(s);
  std::stringstream cmdline;
  cmdline << std::ifstream("/proc/cmdline").rdbuf();
  airlock::guest::BootParams params = airlock::guest::ParseBootParams(cmdline.str());
  if (params.probe) {
    Console(airlock::kProbeMarker);
    airlock::guest::PowerOff();
  }
  // After the agent's own start: it keeps its randomized layout, and every
  // process after it (nft below included) starts at the same addresses.
  if (!params.aslr) {
    if (absl::Status s = airlock::guest::TurnOffAslr(); !s.ok()) {
      Console(absl::StrCat("airlock-init: ", s.message()));
    }
  }
  if (absl::Status s = airlock::guest::BoundPerCpuPageLists(); !s.ok()) {
    Console(absl::StrCat("airlock-init: ", s.message()));
  }
  // A boot that hangs says on the console where (the kernel runs quiet).
  static airlock::guest::BootWatch watch(absl::Seconds(15), absl::Seconds(15));
  // Beside the boot's own steps; the servers below find it done.
  std::thread grpc_ready([] {
    auto step = watch.Begin("starting gRPC");
    airlock::guest::InitGrpc();
  });
  // Three chains, so that a boot waits for the longest, not their sum:
  // the egress interface and its ruleset on a thread of their own (their
  // modules, then nft), the root disk and the ports here, and modules
  // nothing needs before the agent answers after the switch.
  std::future<absl::Status> egress_ready = std::async(std::launch::async, [] {
    auto step = watch.Begin("loading the network modules");
    if (absl::Status s = airlock::guest::LoadModules("/lib/modules", airlock::guest::kNetModules);
        !s.ok()) {
      return s;
    }
    step.Finish();
    step = watch.Begin("setting up the egress interface");
    if (absl::Status s = airlock::guest::SetUpEgressInterface(); !s.ok()) return s;
    step.Finish();
    step = watch.Begin("loading the egress ruleset");
    auto nft = airlock::guest::Spawn({"/sbin/nft", "-f", "/etc/airlock/egress.nft"});
    if (!nft.ok()) return nft.status();
    return airlock::guest::Await(*nft,
                                 "loading the egress ruleset (nft -f /etc/airlock/egress.nft)");
  });
  auto step = watch.Begin("loading modules");
  if (absl::Status s = airlock::guest::LoadModules("/lib/modules"); !s.ok()) Fail(s);
  if (absl::Status s = airlock::guest::ReportSmallerFreeBlocks(); !s.ok()) {
    Console(absl::StrCat("airlock-init: ", s.message()));
  }
  auto late = airlock::guest::OpenModules("/lib/modules", airlock::guest::kLateModules);
  if (!late.ok()) Fail(late.status());
  step = watch.Begin("mounting the root disk");
  if (absl::Status s = airlock::guest::MountRoot(params.root_device, "/sysroot"); !s.ok()) Fail(s);
  step = watch.Begin("finding the agent's ports");
  auto port = airlock::guest::FindVirtioPort(params.port_name);
  if (!port.ok()) Fail(port.status());
  auto egress_port = airlock::guest::FindVirtioPort(airlock::guest::kEgressPortName);
  if (!egress_port.ok()) Fail(egress_port.status());
  // The egress redirect must be in place before any guest process runs.
  step.Finish();
  if (absl::Status s = egress_ready.get(); !s.ok()) Fail(s);
  // After the egress chain: the Docker list leaves out what it loaded.
  if (params.docker) {
    step = watch.Begin("loading the Docker modules");
    if (absl::Status s =
            airlock::guest::LoadModules("/lib/modules", airlock::guest::kDockerModules);
        !s.ok()) {
      Fail(s);
    }
  }
  step = watch.Begin("switching to the root disk");
  if (absl::Status s = airlock::guest::SwitchRoot("/sysroot", params.hostname); !s.ok()) Fail(s);
  airlock::guest::StartLateModules(std::move(*late));
  step = watch.Begin("writing the egress settings");
  if (absl::Status s = airlock::guest::WriteEgressConfig(""); !s.ok()) Fail(s);
  if (absl::Status s = airlock::guest::WriteHostsName("", params.hostname); !s.ok()) {
    // Only a lookup of its own name is slower without it.
    Console(absl::StrCat("airlock-init: cannot write /etc/hosts: ", s.message()));
  }
  if (params.ensure_agent_user) {
    step = watch.Begin("making the agent user");
    if (absl::Status s = airlock::guest::EnsureAgentUser(""); !s.ok()) Fail(s);
  }

  step.Finish();
  grpc_ready.join();
  step = watch.Begin("starting the agent's servers");
  // Egress: the agent's listeners, served to proxyd on the egress port.
  static airlock::guest::EgressService egress;
  if (absl::Status s = egress.Listen(airlock::guest::kTransparentPort,
                                     airlock::guest::kForwardProxyPort,
                                     airlock::guest::kDnsAddress, 53, /*forwarded=*/true);
      !s.ok()) {
    Fail(s);
  }
  std::thread([path = *egress_port] {
    airlock::guest::ServeRawPort(path, [](int fd, std::string pending) {
      airlock::EgressTransport tunnel(fd, std::move(pending));
      egress.Serve(&tunnel);
    });
  }).detach();

  airlock::guest::AgentService service([] { airlock::guest::PowerOff(); },
                                      airlock::guest::ApplyClaim);
  std::unique_ptr<grpc::Server> server = BuildServer(&service, "");
  if (!server) Fail(absl::InternalError("cannot start the gRPC server"));
  step.Finish();
  airlock::guest::ServePort(server.get(), *port, [] {
    watch.Done();
    Console(airlock::kAgentReadyMarker);
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (getpid() == 1) return RunAsInit();
  std::string listen;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (absl::StartsWith(a, "--listen=")) {
      listen = a.substr(9);
    } else {
      std::cerr << "usage: airlock-agent --listen=unix:PATH  (as PID 1 it boots the guest)\n";
      return a == "--help" ? 0 : 2;
    }
  }
  if (listen.empty()) {
    std::cerr << "airlock-agent: not PID 1; give --listen=unix:PATH to serve for testing\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  airlock::guest::AgentService service([] {});
  std::unique_ptr<grpc::Server> server = BuildServer(&service, listen);
  if (!server) {
    std::cerr << "airlock-agent: cannot listen on " << listen << "\n";
    return 1;
  }
  server->Wait();
  return 0;
}
