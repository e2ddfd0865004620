#include "secretsd/services.h"

#include <set>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "secretsd/validation.h"

namespace airlock::secretsd {
namespace {

bool KnownFormat(const std::string& f) {
  return f == "bearer" || f == "replace" || (absl::StartsWith(f, "header:") && f.size() > 7) ||
         (absl::StartsWith(f, "basic:") && f.size() > 6);
}

TEST(ServicesTest, EveryRowIsWellFormedAndVariablesAreNotShared) {
  std::set<std::string> names, envs;
  ASSERT_GE(BuiltinServices().size(), 8u);
  for (const auto& s : BuiltinServices()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    ASSERT_FALSE(s.env.empty()) << s.name;
    ASSERT_FALSE(s.hosts.empty()) << s.name;
    for (const auto& e : s.env) {
      EXPECT_TRUE(ValidateEnvName(e).ok()) << e;
      EXPECT_TRUE(envs.insert(e).second) << e << " belongs to two services";
      EXPECT_EQ(ServiceOwningEnv(e), &s);
    }
    for (const auto& h : s.hosts) {
      auto norm = NormalizeHostPattern(h.host);
      ASSERT_TRUE(norm.ok()) << h.host;
      EXPECT_EQ(*norm, h.host);
      EXPECT_TRUE(KnownFormat(h.format)) << s.name << " " << h.format;
    }
    EXPECT_EQ(FindService(s.name), &s);
  }
  EXPECT_EQ(FindService("nope"), nullptr);
  EXPECT_EQ(ServiceOwningEnv("MY_TOKEN"), nullptr);
}

TEST(ServicesTest, TheIssuesTable) {
  auto host_format = [](const std::string& service, const std::string& host) {
    const ServiceDef* s = FindService(service);
    if (s == nullptr) return std::string("no service");
    for (const auto& h : s->hosts) {
      if (h.host == host) return h.format;
    }
    return std::string("no host");
  };
  EXPECT_EQ(host_format("anthropic", "api.anthropic.com"), "header:x-api-key");
  EXPECT_EQ(host_format("openai", "api.openai.com"), "bearer");
  EXPECT_EQ(host_format("github", "api.github.com"), "bearer");
  EXPECT_EQ(host_format("github", "github.com"), "basic:x-access-token");
  EXPECT_EQ(host_format("google", "generativelanguage.googleapis.com"), "header:x-goog-api-key");
  EXPECT_EQ(host_format("groq", "api.groq.com"), "bearer");
  EXPECT_EQ(host_format("mistral", "api.mistral.ai"), "bearer");
  EXPECT_EQ(host_format("xai", "api.x.ai"), "bearer");
  EXPECT_EQ(host_format("openrouter", "openrouter.ai"), "bearer");
  EXPECT_EQ(FindService("github")->env, (std::vector<std::string>{"GH_TOKEN", "GITHUB_TOKEN"}));
  EXPECT_EQ(FindService("google")->env,
            (std::vector<std::string>{"GEMINI_API_KEY", "GOOGLE_API_KEY"}));
}

}  // namespace
}  // namespace airlock::secretsd
