// FakeQmp: a QMP server played by a test on a real Unix socket, for the
// code that drives QEMU through QmpClient.
#ifndef AIRLOCK_VMMD_FAKE_QMP_H_
#define AIRLOCK_VMMD_FAKE_QMP_H_

#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/fd_io.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock::vmmd {

// FakeQmp accepts one client on `path` and answers each command line with
// `answer(command)` (lines, each ending "\n"); the greeting goes first.
class FakeQmp {
 public:
  FakeQmp(const std::string& path, std::function<std::string(const nlohmann::json&)> answer) {
    listen_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(listen_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_, 1), 0);
    thread_ = std::thread([this, answer] {
      int c = accept(listen_, nullptr, nullptr);
      if (c < 0) return;
      WriteAll(c, "{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n");
      std::string buf;
      char chunk[512];
      ssize_t n;
      while ((n = read(c, chunk, sizeof(chunk))) > 0) {
        buf.append(chunk, n);
        size_t nl;
        while ((nl = buf.find('\n')) != std::string::npos) {
          auto cmd = nlohmann::json::parse(buf.substr(0, nl));
          buf.erase(0, nl + 1);
          seen.push_back(cmd["execute"].get<std::string>());
          std::string out = answer(cmd);
          if (out.empty()) {
            close(c);
            return;
          }
          WriteAll(c, out);
        }
      }
      close(c);
    });
  }
  ~FakeQmp() {
    shutdown(listen_, SHUT_RDWR);
    close(listen_);
    thread_.join();
  }
  std::vector<std::string> seen;

 private:
  int listen_ = -1;
  std::thread thread_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_FAKE_QMP_H_
