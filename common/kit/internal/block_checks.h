// The checks that relate the entries of one declaration block of a
// descriptor (capabilities.h). Private to the kit library.
#ifndef AIRLOCK_COMMON_KIT_INTERNAL_BLOCK_CHECKS_H_
#define AIRLOCK_COMMON_KIT_INTERNAL_BLOCK_CHECKS_H_

#include <vector>

#include "common/kit/capabilities.h"
#include "common/kit/problems.h"

namespace airlock::kit::internal {

// Located ties an entry to the path it was declared at, for block checks.
struct Located {
  const CapabilityEntry* entry;
  FieldPath path;
};

// CheckBlock applies the rules that relate entries of one declaration
// block: the ordinary entries, or one group's members.
void CheckBlock(const std::vector<Located>& block, const CapabilityRules& rules, bool cross_entry,
                Problems* problems);

}  // namespace airlock::kit::internal

#endif  // AIRLOCK_COMMON_KIT_INTERNAL_BLOCK_CHECKS_H_
