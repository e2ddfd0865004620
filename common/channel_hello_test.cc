#include "common/channel_hello.h"

#include "gtest/gtest.h"

namespace airlock {
namespace {

TEST(FindLineTest, SkipsJunkAndPartialLines) {
  std::string buf = std::string("\x00\x01junk from a dead connection\n", 30) + "AIRLOCK-HELLO ab";
  std::string rest;
  EXPECT_FALSE(FindLine(&buf, kHelloPrefix, &rest));
  EXPECT_EQ(buf, "AIRLOCK-HELLO ab");
  buf += "c12\nPRI * HTTP/2.0";
  ASSERT_TRUE(FindLine(&buf, kHelloPrefix, &rest));
  EXPECT_EQ(rest, "abc12");
  EXPECT_EQ(buf, "PRI * HTTP/2.0");
}

TEST(FindLineTest, BoundsJunkWithoutNewlines) {
  std::string buf(10000, 'x');
  std::string rest;
  EXPECT_FALSE(FindLine(&buf, kOkPrefix, &rest));
  EXPECT_LE(buf.size(), 4096u);
}

}  // namespace
}  // namespace airlock
