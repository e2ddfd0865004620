#include "policyd/presets.h"

#include "absl/strings/str_cat.h"

namespace airlock::policyd {
namespace {

// The balanced preset: what a coding agent usually needs and little else.
// New installs start on it. Change it here (and in README's list).
const char* const kBalanced[] = {
    // AI provider APIs
    "api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com",
    "api.groq.com", "api.mistral.ai", "api.x.ai", "openrouter.ai",
    // Package registries
    "registry.npmjs.org", "registry.yarnpkg.com", "pypi.org", "files.pythonhosted.org",
    "crates.io", "static.crates.io", "index.crates.io", "proxy.golang.org", "sum.golang.org",
    "rubygems.org", "repo.maven.apache.org", "repo1.maven.org", "deb.debian.org",
    "security.debian.org",
    // Code hosts
    "github.com", "api.github.com", "codeload.github.com", "objects.githubusercontent.com",
    "raw.githubusercontent.com", "gitlab.com", "bitbucket.org",
    // Container registries
    "registry-1.docker.io", "auth.docker.io", "production.cloudflare.docker.com", "ghcr.io",
    "quay.io", "gcr.io", "mcr.microsoft.com",
};

}  // namespace

absl::StatusOr<std::vector<std::string>> PresetResources(const std::string& name) {
  if (name == "allow-all") return std::vector<std::string>{"**"};
  if (name == "deny-all") return std::vector<std::string>{};
  if (name == "balanced") return std::vector<std::string>(std::begin(kBalanced), std::end(kBalanced));
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown preset \"", name, "\": use allow-all, balanced or deny-all"));
}

}  // namespace airlock::policyd
