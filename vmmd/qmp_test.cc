// QmpClient against a QMP server played by the test on a real Unix socket.
#include "vmmd/qmp.h"

#include <sys/socket.h>
#include <unistd.h>
#include <sys/un.h>

#include <thread>

#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

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

TEST(QmpClientTest, NegotiatesSkipsEventsAndReturnsResults) {
  testing::ShortTempDir dir;
  std::string path = dir.path() + "/qmp.sock";
  FakeQmp qemu(path, [](const nlohmann::json& cmd) -> std::string {
    std::string c = cmd["execute"];
    if (c == "qmp_capabilities") return "{\"return\": {}}\r\n";
    if (c == "query-migrate") {
      return "{\"event\": \"MIGRATION\", \"data\": {\"status\": \"active\"}}\r\n"
             "{\"return\": {\"status\": \"completed\"}}\r\n";
    }
    if (c == "migrate") {
      EXPECT_EQ(cmd["arguments"]["uri"], "unix:/x");
      return "{\"return\": {}}\r\n";
    }
    return "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command bogus has not been found\"}}\r\n";
  });
  auto qmp = QmpClient::Connect(path, std::chrono::seconds(5));
  ASSERT_TRUE(qmp.ok()) << qmp.status();
  auto migrated = qmp->Execute("migrate", {{"uri", "unix:/x"}});
  ASSERT_TRUE(migrated.ok()) << migrated.status();
  auto status = qmp->Execute("query-migrate");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ((*status)["status"], "completed");
  auto bogus = qmp->Execute("bogus");
  EXPECT_EQ(bogus.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bogus.status().message().find("has not been found"), std::string::npos);
}

TEST(QmpClientTest, AClosedSocketIsUnavailableNotAHang) {
  testing::ShortTempDir dir;
  std::string path = dir.path() + "/qmp.sock";
  FakeQmp qemu(path, [](const nlohmann::json& cmd) -> std::string {
    if (cmd["execute"] == "qmp_capabilities") return "{\"return\": {}}\r\n";
    return "";  // hang up, as a QEMU that exits
  });
  auto qmp = QmpClient::Connect(path, std::chrono::seconds(5));
  ASSERT_TRUE(qmp.ok()) << qmp.status();
  auto r = qmp->Execute("quit", nullptr, std::chrono::seconds(5));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("closed its QMP socket"), std::string::npos)
      << r.status();
}

TEST(QmpClientTest, ASymlinkInPlaceOfTheSocketIsRefused) {
  testing::ShortTempDir dir;
  // A real QMP socket elsewhere: the jailed QEMU's directory points to it.
  std::string real = dir.path() + "/other.sock";
  FakeQmp other(real, [](const nlohmann::json&) { return std::string("{\"return\": {}}\r\n"); });
  std::string link = dir.path() + "/qmp.sock";
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  auto qmp = QmpClient::Connect(link, std::chrono::seconds(2));
  EXPECT_EQ(qmp.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(qmp.status().message().find("a symlink is refused"), std::string::npos)
      << qmp.status();
  EXPECT_TRUE(other.seen.empty()) << "the client spoke to the socket the symlink names";
  // Unblock the fake's accept.
  auto direct = QmpClient::Connect(real, std::chrono::seconds(2));
  EXPECT_TRUE(direct.ok()) << direct.status();
}

TEST(QmpClientTest, NoSocketIsUnavailableAfterTheTimeout) {
  testing::ShortTempDir dir;
  auto qmp = QmpClient::Connect(dir.path() + "/none.sock", std::chrono::milliseconds(200));
  EXPECT_EQ(qmp.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(qmp.status().message().find("cannot reach QEMU's QMP socket"), std::string::npos);
}

}  // namespace
}  // namespace airlock::vmmd
