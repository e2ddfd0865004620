#include "secretsd/validation.h"

#include "gtest/gtest.h"

namespace airlock::secretsd {
namespace {

TEST(ValidationTest, SandboxNames) {
  for (const std::string& ok :
       std::vector<std::string>{"a", "box1", "1box", "my-box", "Box", "my.box",
                                std::string(63, 'a')}) {
    EXPECT_TRUE(ValidateSandboxName(ok).ok()) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{
           "", "-box", ".box", "my_box", "a b", "box@x", "global", std::string(64, 'a')}) {
    absl::Status s = ValidateSandboxName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("sandbox"), std::string::npos) << s;
  }
  EXPECT_NE(ValidateSandboxName("global").message().find("reserved"), std::string::npos);
}

TEST(ValidationTest, EnvNames) {
  for (const char* ok : {"MY_TOKEN", "_X", "A1", "NPM_TOKEN"}) {
    EXPECT_TRUE(ValidateEnvName(ok).ok()) << ok;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "1A", "my_token", "A-B", "A B", "PATH", "HTTPS_PROXY",
                                "LD_PRELOAD", std::string(129, 'A')}) {
    absl::Status s = ValidateEnvName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("env"), std::string::npos) << s;
  }
}

TEST(ValidationTest, KitEnvNames) {
  for (const char* ok : {"MY_TOKEN", "_x", "codeforge_token", "CodeForge1"}) {
    EXPECT_TRUE(ValidateKitEnvName(ok).ok()) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{
           "", "1a", "a-b", "a b", "PATH", "http_proxy", "Ld_Preload", std::string(129, 'a')}) {
    absl::Status s = ValidateKitEnvName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("env"), std::string::npos) << s;
  }
}

TEST(ValidationTest, ServiceHandles) {
  for (const std::string& ok : std::vector<std::string>{"anthropic", "codeforge", "my-svc.v2_x",
                                                        "1pass", std::string(64, 'a')}) {
    EXPECT_TRUE(ValidateServiceHandle(ok).ok()) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{"", "-svc", ".svc", "_svc", "Svc", "a b",
                                                         "a/b", std::string(65, 'a')}) {
    absl::Status s = ValidateServiceHandle(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("service"), std::string::npos) << s;
  }
}

TEST(ValidationTest, HostNames) {
  EXPECT_EQ(*NormalizeHostName("API.CodeForge.dev."), "api.codeforge.dev");
  EXPECT_EQ(*NormalizeHostName("localhost"), "localhost");
  for (const char* bad : {"", "*.example.com", "a.com:443", "https://a.com", "a..com", "a_b.com"}) {
    auto h = NormalizeHostName(bad);
    EXPECT_FALSE(h.ok()) << bad;
    EXPECT_NE(h.status().message().find("domain"), std::string::npos) << h.status();
  }
}

TEST(ValidationTest, HostPatterns) {
  EXPECT_EQ(*NormalizeHostPattern("API.Example.COM."), "api.example.com");
  EXPECT_EQ(*NormalizeHostPattern("*.example.com"), "*.example.com");
  EXPECT_EQ(*NormalizeHostPattern("localhost"), "localhost");
  for (const char* bad : {"", "*.com", "*", "a.*.com", "**.example.com", "exa mple.com", "-a.com",
                          "a-.com", "a..com", "https://a.com", "a.com/x", "a.com:443", "a_b.com"}) {
    auto h = NormalizeHostPattern(bad);
    EXPECT_FALSE(h.ok()) << bad;
    EXPECT_NE(h.status().message().find("hosts"), std::string::npos) << h.status();
  }
}

TEST(ValidationTest, HostMatching) {
  EXPECT_TRUE(HostMatches("api.github.com", "api.github.com"));
  EXPECT_FALSE(HostMatches("github.com", "api.github.com"));
  EXPECT_FALSE(HostMatches("api.github.com", "github.com"));
  EXPECT_TRUE(HostMatches("*.example.com", "a.example.com"));
  EXPECT_TRUE(HostMatches("*.example.com", "a-b.example.com"));
  EXPECT_FALSE(HostMatches("*.example.com", "example.com"));
  EXPECT_FALSE(HostMatches("*.example.com", "a.b.example.com"));
  EXPECT_FALSE(HostMatches("*.example.com", "aexample.com"));
  EXPECT_FALSE(HostMatches("*.example.com", "a.example.com.evil.net"));
  EXPECT_FALSE(HostMatches("*.example.com", ".example.com"));
}

TEST(ValidationTest, RequestHosts) {
  EXPECT_EQ(*NormalizeRequestHost("API.GitHub.com"), "api.github.com");
  EXPECT_EQ(*NormalizeRequestHost("api.github.com:443"), "api.github.com");
  EXPECT_EQ(*NormalizeRequestHost("api.github.com."), "api.github.com");
  EXPECT_FALSE(NormalizeRequestHost("").ok());
  EXPECT_FALSE(NormalizeRequestHost("a/b").ok());
  EXPECT_FALSE(NormalizeRequestHost("*.github.com").ok());
}

TEST(ValidationTest, Placeholders) {
  EXPECT_TRUE(ValidatePlaceholder("sbx-cs-abcdef").ok());
  EXPECT_TRUE(ValidatePlaceholder("My.Place_holder-1").ok());
  EXPECT_TRUE(ValidatePlaceholder(std::string(128, 'p')).ok());
  for (const std::string& bad : std::vector<std::string>{
           "short", std::string(129, 'p'), "has space1", "semi;colon", "proxy-managed"}) {
    absl::Status s = ValidatePlaceholder(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("placeholder"), std::string::npos) << s;
    if (bad != "proxy-managed") {
      EXPECT_EQ(s.message().find(bad), std::string::npos) << s;
    }
  }
}

TEST(ValidationTest, ValuesAreNeverQuoted) {
  const std::string secret = "s3cr3t-VALUE-xyz";
  EXPECT_TRUE(ValidateValue(secret).ok());
  EXPECT_TRUE(ValidateValue(std::string(kMaxValueBytes, 'v')).ok());
  for (const std::string& bad : std::vector<std::string>{
           std::string(), secret + "\n", secret + "\r", secret + std::string(1, '\0'),
           secret + std::string(kMaxValueBytes, 'v')}) {
    absl::Status s = ValidateValue(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("value"), std::string::npos) << s;
    EXPECT_EQ(s.message().find(secret), std::string::npos) << s;
  }
}

TEST(ValidationTest, QuoteForMessageEscapesAndCuts) {
  EXPECT_EQ(QuoteForMessage("a\nb"), "\"a\\nb\"");
  EXPECT_EQ(QuoteForMessage(std::string(100, 'x')), "\"" + std::string(64, 'x') + "...\"");
}

}  // namespace
}  // namespace airlock::secretsd
