#include "common/log.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

TEST(LogTest, LineIsOneJsonObjectWithFields) {
  std::string line = FormatLogLine(1700000000.25, LogLevel::kWarning, "vmmd",
                                   "boot failed", {{"sandbox", "s1"}, {"reason", "a\nb"}});
  EXPECT_EQ(line.find('\n'), std::string::npos) << "newlines must be escaped";
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["ts"], "2023-11-14T22:13:20.250Z");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["daemon"], "vmmd");
  EXPECT_EQ(j["msg"], "boot failed");
  EXPECT_EQ(j["sandbox"], "s1");
  EXPECT_EQ(j["reason"], "a\nb");
}

TEST(LogTest, InvalidUtf8DoesNotThrow) {
  std::string line = FormatLogLine(0, LogLevel::kInfo, "d", "m", {{"k", "\xff\xfe"}});
  EXPECT_NO_THROW(nlohmann::json::parse(line));
}

TEST(LogTest, ParsesLevels) {
  LogLevel l;
  ASSERT_TRUE(ParseLogLevel("debug", &l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_FALSE(ParseLogLevel("verbose", &l));
}

}  // namespace
}  // namespace airlock
