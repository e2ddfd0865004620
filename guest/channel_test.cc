#include "guest/channel.h"

#include <string>

#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

TEST(DropLeadingHellosTest, HellosSaidAgainBeforeTheStreamAreDropped) {
  std::string buf = "AIRLOCK-HELLO 1\nAIRLOCK-HELLO 2\nPRI * HTTP/2.0\r\n";
  EXPECT_TRUE(DropLeadingHellos(&buf));
  EXPECT_EQ(buf, "PRI * HTTP/2.0\r\n");
  // Once the stream has begun nothing in it is taken for a hello.
  buf = "PRI * HTTP/2.0\r\nAIRLOCK-HELLO 3\n";
  EXPECT_TRUE(DropLeadingHellos(&buf));
  EXPECT_EQ(buf, "PRI * HTTP/2.0\r\nAIRLOCK-HELLO 3\n");
  buf = "AIRLOCK-OK 1\n";
  EXPECT_TRUE(DropLeadingHellos(&buf));
  EXPECT_EQ(buf, "AIRLOCK-OK 1\n");
}

TEST(DropLeadingHellosTest, WaitsWhileTheStartMayStillBeAHello) {
  for (std::string partial : {"", "AIRL", "AIRLOCK-HELLO ", "AIRLOCK-HELLO 42"}) {
    std::string buf = partial;
    EXPECT_FALSE(DropLeadingHellos(&buf)) << partial;
    EXPECT_EQ(buf, partial);
  }
  std::string buf = "AIRLOCK-HELLO 1\nAIRLOCK-HEL";
  EXPECT_FALSE(DropLeadingHellos(&buf));
  EXPECT_EQ(buf, "AIRLOCK-HEL");
  // A "hello" that never ends is not waited for: it is the stream's.
  buf = "AIRLOCK-HELLO " + std::string(kMaxHelloLine, 'x');
  EXPECT_TRUE(DropLeadingHellos(&buf));
  EXPECT_EQ(buf.size(), 14 + kMaxHelloLine);
}

}  // namespace
}  // namespace airlock::guest
