// Decoding of the typed capability configs (capabilities.h), apart from
// the entries and blocks that hold them. Private to the kit library.
#ifndef AIRLOCK_COMMON_KIT_INTERNAL_TYPED_CONFIGS_H_
#define AIRLOCK_COMMON_KIT_INTERNAL_TYPED_CONFIGS_H_

#include "common/kit/capabilities.h"
#include "common/kit/problems.h"

namespace airlock::kit::internal {

// DecodeTypedConfig decodes the config of a typed type. Absent and null
// configs read as an empty mapping: each type then says what it misses.
TypedConfig DecodeTypedConfig(const CapabilityEntry& e, const FieldPath& path, Problems* problems);

}  // namespace airlock::kit::internal

#endif  // AIRLOCK_COMMON_KIT_INTERNAL_TYPED_CONFIGS_H_
