#include "proxyd/diagnose.h"

#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

TEST(NameserversTest, ReadsNameserverLinesOnly) {
  EXPECT_EQ(Nameservers("# comment\nnameserver 10.0.0.53\nsearch x\n  nameserver   ::1 \n"
                        "nameserverx y\n"),
            (std::vector<std::string>{"10.0.0.53", "::1"}));
  EXPECT_TRUE(Nameservers("").empty());
}

}  // namespace
}  // namespace airlock::proxyd
