// egress_harness: the guest agent's egress endpoint (the real
// guest::EgressService), run on the host so benchmarks can drive proxyd
// without a VM in the way. It serves the egress tunnel on a Unix socket
// that speaks the same hello handshake as a virtio-serial port (each
// connection one tunnel, common/egress_transport.h), attaches that
// socket to proxyd as sandbox --sandbox, and prints the forward proxy port
// clients should use. Only the forward path works here: the transparent
// path needs the guest's redirect.
//
// usage: egress_harness --proxyd-socket PATH --socket PATH --sandbox NAME
//                       --root DIR
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/client.h"
#include "common/egress_transport.h"
#include "common/fd_io.h"
#include "common/malloc_tuning.h"
#include "guest/egress.h"
#include "common/channel_hello.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"

namespace {

void ServeHello(airlock::guest::EgressService* egress, int listen_fd) {
  while (true) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::string line;
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
    std::string prefix = airlock::kHelloPrefix;
    if (line.compare(0, prefix.size(), prefix) != 0) {
      close(fd);
      continue;
    }
    std::string ok = std::string(airlock::kOkPrefix) + line.substr(prefix.size()) + "\n";
    airlock::WriteAll(fd, ok);
    // As on the port: a new tunnel ends the previous one.
    std::thread([egress, fd] {
      airlock::EgressTransport tunnel(fd);
      egress->Serve(&tunnel);
    }).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  // As the agent does (guest/main.cc).
  airlock::KeepBulkBuffersMapped();
  std::string proxyd_socket, socket_path, sandbox = "bench", root;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--proxyd-socket") proxyd_socket = v;
    else if (k == "--socket") socket_path = v;
    else if (k == "--sandbox") sandbox = v;
    else if (k == "--root") root = v;
  }
  if (proxyd_socket.empty() || socket_path.empty() || root.empty()) {
    std::cerr << "usage: egress_harness --proxyd-socket PATH --socket PATH --sandbox NAME "
                 "--root DIR\n";
    return 2;
  }
  airlock::guest::EgressService egress;
  egress.set_root(root);  // the CA goes here, never into the host's store
  if (absl::Status s = egress.Listen(0, 0, "", 0); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
  unlink(socket_path.c_str());
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(lfd, 8) != 0) {
    std::cerr << "cannot listen on " << socket_path << "\n";
    return 1;
  }
  std::thread(ServeHello, &egress, lfd).detach();

  auto proxy = airlock::proxy::v1::Proxy::NewStub(airlock::DialUnix(proxyd_socket));
  grpc::ClientContext ctx;
  airlock::proxy::v1::AttachRequest req;
  req.set_sandbox(sandbox);
  req.set_channel_path(socket_path);
  airlock::proxy::v1::AttachResponse resp;
  grpc::Status s = proxy->Attach(&ctx, req, &resp);
  if (!s.ok()) {
    std::cerr << "attach: " << s.error_message() << "\n";
    _exit(1);  // gRPC's threads would keep a plain return from ending the process
  }
  std::cout << "forward_port=" << egress.forward_port() << std::endl;
  pause();
  return 0;
}
