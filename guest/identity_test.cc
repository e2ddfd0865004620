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

}  // namespace
}  // namespace airlock::guest
