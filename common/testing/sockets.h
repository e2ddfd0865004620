// Sockets for tests: a connected loopback TCP pair (a reset on one end
// shows as ECONNRESET on the other, as a guest's app sees it).
#ifndef AIRLOCK_COMMON_TESTING_SOCKETS_H_
#define AIRLOCK_COMMON_TESTING_SOCKETS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

namespace airlock::testing {

// LoopbackTcpPair returns the connecting end and the accepted end, both
// blocking; {-1, -1} when the pair cannot be made.
inline std::pair<int, int> LoopbackTcpPair() {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (l >= 0) close(l);
    return {-1, -1};
  }
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (c >= 0) close(c);
    close(l);
    return {-1, -1};
  }
  int s = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  close(l);
  if (s < 0) {
    close(c);
    return {-1, -1};
  }
  return {c, s};
}

}  // namespace airlock::testing

#endif  // AIRLOCK_COMMON_TESTING_SOCKETS_H_
