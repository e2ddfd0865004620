#include "guest/identity.h"

#include <sys/stat.h>

#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

airlock::agent::v1::ClaimRequest Valid() {
  airlock::agent::v1::ClaimRequest c;
  c.set_hostname("dev-1.example");
  c.set_machine_id("0123456789abcdef0123456789abcdef");
  c.set_seed(std::string(64, 'x'));
  c.set_unix_time_ns(1790000000000000000);
  return c;
}

TEST(ValidateClaimTest, AcceptsAWellFormedClaim) { EXPECT_TRUE(ValidateClaim(Valid()).ok()); }

TEST(ValidateClaimTest, RefusesEachMalformedField) {
  struct Case {
    std::function<void(airlock::agent::v1::ClaimRequest&)> mutate;
    std::string says;
  };
  std::vector<Case> cases = {
      {[](auto& c) { c.set_hostname(""); }, "1 to 63 characters"},
      {[](auto& c) { c.set_hostname(std::string(64, 'a')); }, "1 to 63 characters"},
      {[](auto& c) { c.set_hostname("a b"); }, "only letters, digits"},
      {[](auto& c) { c.set_hostname("a/../b"); }, "only letters, digits"},
      {[](auto& c) { c.set_machine_id("0123456789ABCDEF0123456789ABCDEF"); }, "32 lowercase hex"},
      {[](auto& c) { c.set_machine_id("0123"); }, "32 lowercase hex"},
      {[](auto& c) { c.set_machine_id("0123456789abcdef0123456789abcdef\n"); }, "32 lowercase hex"},
      {[](auto& c) { c.set_seed(std::string(31, 'x')); }, "32 to 512 bytes"},
      {[](auto& c) { c.set_seed(std::string(513, 'x')); }, "32 to 512 bytes"},
      {[](auto& c) { c.set_unix_time_ns(0); }, "after 1970"},
  };
  for (const Case& k : cases) {
    auto c = Valid();
    k.mutate(c);
    absl::Status s = ValidateClaim(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.says;
    EXPECT_NE(s.message().find(k.says), std::string::npos) << s.message();
  }
}

TEST(WriteMachineIdTest, ReplacesTheFileReadOnly) {
  testing::ShortTempDir dir;
  ASSERT_TRUE(WriteMachineId(dir.path(), "0123456789abcdef0123456789abcdef").ok());
  ASSERT_TRUE(WriteMachineId(dir.path(), "fedcba9876543210fedcba9876543210").ok());
  EXPECT_EQ(ReadFileToString(dir.path() + "/etc/machine-id"), "fedcba9876543210fedcba9876543210\n");
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/etc/machine-id").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
}

TEST(HostsWithNameTest, ReplacesTheOwnNameLineBesideLocalhost) {
  EXPECT_EQ(HostsWithName("127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n"
                          "10.0.0.5 db.internal\n",
                          "cl3"),
            "127.0.0.1 localhost\n127.0.1.1\tcl3\n::1 localhost\n10.0.0.5 db.internal\n");
}

TEST(HostsWithNameTest, AddsTheLineAndKeepsEveryOther) {
  EXPECT_EQ(HostsWithName("# mine\n10.0.0.5\tdb\n", "box"), "# mine\n10.0.0.5\tdb\n127.0.1.1\tbox\n");
  // A 127.0.1.1 line of another name, tab-separated, goes too.
  EXPECT_EQ(HostsWithName("127.0.0.1\tlocalhost\n127.0.1.1\told old.example\n", "new"),
            "127.0.0.1\tlocalhost\n127.0.1.1\tnew\n");
}

TEST(HostsWithNameTest, AnEmptyFileGetsTheLocalhostLines) {
  EXPECT_EQ(HostsWithName("", "box"),
            "127.0.0.1\tlocalhost\n127.0.1.1\tbox\n::1\tlocalhost ip6-localhost ip6-loopback\n");
}

TEST(WriteHostsNameTest, RewritesTheFileAndMakesOneWhenMissing) {
  testing::ShortTempDir dir;
  ASSERT_TRUE(WriteHostsName(dir.path(), "a").ok());
  ASSERT_TRUE(WriteHostsName(dir.path(), "b").ok());
  EXPECT_EQ(ReadFileToString(dir.path() + "/etc/hosts"),
            "127.0.0.1\tlocalhost\n127.0.1.1\tb\n::1\tlocalhost ip6-localhost ip6-loopback\n");
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/etc/hosts").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

}  // namespace
}  // namespace airlock::guest
