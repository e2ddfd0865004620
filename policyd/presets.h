// The built-in presets of global network rules.
#ifndef AIRLOCK_POLICYD_PRESETS_H_
#define AIRLOCK_POLICYD_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::policyd {

// PresetResources lists the resources a preset allows: "allow-all" is
// ["**"], "deny-all" is empty, "balanced" is the list in presets.cc.
// INVALID_ARGUMENT for an unknown name.
absl::StatusOr<std::vector<std::string>> PresetResources(const std::string& name);

}  // namespace airlock::policyd

#endif  // AIRLOCK_POLICYD_PRESETS_H_
