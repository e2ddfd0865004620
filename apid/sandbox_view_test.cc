#include "apid/sandbox_view.h"

#include "apid/wire_json.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock::apid {
namespace {

namespace vmm = airlock::vmm::v1;

vmm::Sandbox Sample() {
  vmm::Sandbox sb;
  sb.mutable_spec()->set_name("shell-ab12");
  sb.mutable_spec()->set_agent("shell");
  sb.mutable_spec()->set_display_name("box");
  (*sb.mutable_spec()->mutable_labels())["team"] = "x";
  (*sb.mutable_spec()->mutable_labels())["env"] = "ci";
  sb.set_state(vmm::RUNNING);
  sb.set_cpus(2);
  sb.set_memory_mib(4096);
  sb.set_created_at(1700000000);
  return sb;
}

TEST(SandboxViewTest, RendersTheApiShape) {
  auto view = ToWire(Sample(), "http://127.0.0.1:7777", false);
  auto j = nlohmann::json::parse(ToJson(view));
  EXPECT_EQ(j["name"], "sandboxes/shell-ab12");
  EXPECT_EQ(j["uid"], "shell-ab12");
  EXPECT_EQ(j["displayName"], "box");
  EXPECT_EQ(j["core"]["status"], "running");
  EXPECT_EQ(j["core"]["resources"]["cpus"], 2);
  EXPECT_EQ(j["core"]["resources"]["memoryMib"], "4096") << "int64 is a string";
  EXPECT_EQ(j["core"]["createdAt"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j["core"]["endpoint"]["uri"], "http://127.0.0.1:7777/endpoints/shell-ab12");
  EXPECT_EQ(j["core"]["endpoint"]["authentication"]["defaultTtl"], "300s");
  EXPECT_EQ(j["core"]["labels"]["team"], "x");
  std::string etag = j["core"]["etag"];
  EXPECT_EQ(etag.front(), '"');
  EXPECT_EQ(etag.back(), '"');
  EXPECT_EQ(ToWire(Sample(), "http://127.0.0.1:7777", true).core().status(), "deleting");
}

TEST(SandboxViewTest, EtagFollowsVisibleChanges) {
  vmm::Sandbox a = Sample();
  std::string e1 = ToWire(a, "http://h", false).core().etag();
  EXPECT_EQ(ToWire(Sample(), "http://h", false).core().etag(), e1) << "stable for equal views";
  a.mutable_spec()->set_display_name("renamed");
  EXPECT_NE(ToWire(a, "http://h", false).core().etag(), e1);
  vmm::Sandbox b = Sample();
  b.set_state(vmm::STOPPED);
  EXPECT_NE(ToWire(b, "http://h", false).core().etag(), e1);
}

TEST(SandboxViewTest, IfNoneMatchIsWeak) {
  EXPECT_TRUE(EtagMatches("\"a\"", "\"a\""));
  EXPECT_TRUE(EtagMatches("W/\"a\"", "\"a\""));
  EXPECT_TRUE(EtagMatches("\"x\", \"a\"", "\"a\""));
  EXPECT_TRUE(EtagMatches("*", "\"a\""));
  EXPECT_FALSE(EtagMatches("\"b\"", "\"a\""));
  EXPECT_FALSE(EtagMatches("garbage", "\"a\""));
}

TEST(SandboxViewTest, FailedCarriesFailure) {
  vmm::Sandbox sb = Sample();
  sb.set_state(vmm::FAILED);
  sb.set_failure("the VM exited unexpectedly");
  auto j = nlohmann::json::parse(ToJson(ToWire(sb, "http://h", false)));
  EXPECT_EQ(j["core"]["status"], "failed");
  EXPECT_EQ(j["failure"]["message"], "the VM exited unexpectedly");
}

}  // namespace
}  // namespace airlock::apid
