#include "secretsd/registry_placement.h"

#include "gtest/gtest.h"

namespace airlock::secretsd {
namespace {

TEST(RegistryCredentialAppliesTest, TheRegistrysOwnHostAndPortOnly) {
  EXPECT_TRUE(RegistryCredentialApplies("reg.test:5000", "reg.test", 5000));
  EXPECT_FALSE(RegistryCredentialApplies("reg.test:5000", "reg.test", 443));
  EXPECT_FALSE(RegistryCredentialApplies("reg.test:5000", "reg.test", 0));
  EXPECT_TRUE(RegistryCredentialApplies("ghcr.io", "ghcr.io", 443));
  EXPECT_TRUE(RegistryCredentialApplies("ghcr.io", "ghcr.io", 0));
  EXPECT_FALSE(RegistryCredentialApplies("ghcr.io", "ghcr.io", 8443));
  // No parent domain, no sibling, no suffix trick.
  EXPECT_FALSE(RegistryCredentialApplies("ghcr.io", "evil.ghcr.io", 443));
  EXPECT_FALSE(RegistryCredentialApplies("ghcr.io", "ghcr.io.evil.test", 443));
  EXPECT_FALSE(RegistryCredentialApplies("reg.test", "test", 443));
  EXPECT_FALSE(RegistryCredentialApplies("", "ghcr.io", 443));
  EXPECT_FALSE(RegistryCredentialApplies("reg.test:x", "reg.test", 443));
}

TEST(RegistryCredentialAppliesTest, DockerHubMeansItsApiAndTokenHosts) {
  for (const char* stored : {"docker.io", "index.docker.io", "registry-1.docker.io"}) {
    EXPECT_TRUE(RegistryCredentialApplies(stored, "registry-1.docker.io", 443)) << stored;
    EXPECT_TRUE(RegistryCredentialApplies(stored, "auth.docker.io", 443)) << stored;
    EXPECT_FALSE(RegistryCredentialApplies(stored, "docker.io", 443)) << stored;
    EXPECT_FALSE(RegistryCredentialApplies(stored, "production.cloudflare.docker.com", 443));
    EXPECT_FALSE(RegistryCredentialApplies(stored, "auth.docker.io", 80)) << stored;
  }
}

}  // namespace
}  // namespace airlock::secretsd
