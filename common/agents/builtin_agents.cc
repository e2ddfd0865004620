#include "common/agents/builtin_agents.h"

#include "absl/strings/str_cat.h"
#include "common/agents/internal/embedded.h"

namespace airlock::agents {

using internal::kEmbeddedDescriptorCount;
using internal::kEmbeddedDescriptors;

const std::vector<std::string>& BuiltinAgentNames() {
  // The generated table is already sorted by name.
  static const auto* kNames = [] {
    auto* names = new std::vector<std::string>();
    for (size_t i = 0; i < kEmbeddedDescriptorCount; ++i) {
      names->emplace_back(kEmbeddedDescriptors[i].name);
    }
    return names;
  }();
  return *kNames;
}

std::optional<absl::string_view> BuiltinAgentDescriptor(absl::string_view name) {
  for (size_t i = 0; i < kEmbeddedDescriptorCount; ++i) {
    if (name == kEmbeddedDescriptors[i].name)
      return absl::string_view(kEmbeddedDescriptors[i].text);
  }
  return std::nullopt;
}

std::string BuiltinAgentRef(absl::string_view name) {
  return absl::StrCat(kBuiltinRefPrefix, name);
}

}  // namespace airlock::agents
