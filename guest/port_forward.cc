#include "guest/port_forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace airlock::guest {

absl::StatusOr<int> ConnectLoopback(uint32_t port) {
  if (port == 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("invalid port ", port));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::string err = strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("nothing listens on port ", port, " in the sandbox (", err, ")"));
  }
  return fd;
}

void PumpSocket(int fd, const std::function<bool(absl::string_view, bool)>& send) {
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      send({}, true);
      return;
    }
    if (!send(absl::string_view(buf, n), false)) return;
  }
}

}  // namespace airlock::guest
