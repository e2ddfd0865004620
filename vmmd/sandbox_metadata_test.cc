#include "vmmd/sandbox_metadata.h"

#include <string>

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

namespace vmm = airlock::vmm::v1;

TEST(SandboxMetadataTest, DisplayNames) {
  EXPECT_TRUE(ValidateDisplayName("").ok());
  EXPECT_TRUE(ValidateDisplayName("my_box-2").ok());
  EXPECT_TRUE(ValidateDisplayName(std::string(64, 'a')).ok());
  EXPECT_EQ(ValidateDisplayName(std::string(65, 'a')).message(),
            "display name is 65 characters; at most 64");
  EXPECT_EQ(ValidateDisplayName("a b").message(),
            "display name \"a b\" may hold only letters, digits, '_' and '-'");
}

TEST(SandboxMetadataTest, Labels) {
  vmm::SandboxSpec spec;
  (*spec.mutable_labels())["team/app.x"] = "v";
  EXPECT_TRUE(ValidateMetadata(spec).ok());
  (*spec.mutable_labels())["bad key"] = "v";
  EXPECT_EQ(ValidateMetadata(spec).message(),
            "label key \"bad key\" may hold only letters, digits, '_', '-', '.' and '/'");
  spec.clear_labels();
  (*spec.mutable_labels())[""] = "v";
  EXPECT_EQ(ValidateMetadata(spec).message(), "label key \"\" must be 1 to 63 characters");
  spec.clear_labels();
  (*spec.mutable_labels())["k"] = std::string(257, 'x');
  EXPECT_EQ(ValidateMetadata(spec).message(),
            "label \"k\" has a value of 257 bytes; at most 256");
  spec.clear_labels();
  for (int i = 0; i < 65; ++i) (*spec.mutable_labels())["k" + std::to_string(i)] = "";
  EXPECT_EQ(ValidateMetadata(spec).message(), "65 labels; at most 64");
}

TEST(SandboxMetadataTest, Deadline) {
  vmm::Sandbox sb;
  EXPECT_EQ(ArmedExpiry(sb.spec(), 1000), 0);
  sb.mutable_spec()->set_timeout_seconds(30);
  EXPECT_EQ(ArmedExpiry(sb.spec(), 1000), 1030);
  sb.set_expires_at(1030);
  sb.set_state(vmm::RUNNING);
  EXPECT_FALSE(Expired(sb, 1029));
  EXPECT_TRUE(Expired(sb, 1030));
  sb.set_state(vmm::STOPPED);
  EXPECT_FALSE(Expired(sb, 2000)) << "a stopped sandbox's deadline is not armed";
  sb.mutable_spec()->set_timeout_seconds(31ull * 24 * 3600);
  EXPECT_EQ(ValidateMetadata(sb.spec()).message(), "timeout of 2678400 s is over 30 days");
}

}  // namespace
}  // namespace airlock::vmmd
