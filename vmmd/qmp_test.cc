// QmpClient against a QMP server played by the test on a real Unix socket.
#include "vmmd/qmp.h"

#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "vmmd/fake_qmp.h"

namespace airlock::vmmd {
namespace {

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
