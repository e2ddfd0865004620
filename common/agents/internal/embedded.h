// The table embed_descriptors.py generates: each built-in agent's name
// and its descriptor as authored, sorted by name. Only builtin_agents.cc
// reads it.
#ifndef AIRLOCK_COMMON_AGENTS_INTERNAL_EMBEDDED_H_
#define AIRLOCK_COMMON_AGENTS_INTERNAL_EMBEDDED_H_

#include <cstddef>

namespace airlock::agents::internal {

struct EmbeddedDescriptor {
  const char* name;
  const char* text;  // the YAML file's bytes; it holds no NUL
};

extern const EmbeddedDescriptor kEmbeddedDescriptors[];
extern const size_t kEmbeddedDescriptorCount;

}  // namespace airlock::agents::internal

#endif  // AIRLOCK_COMMON_AGENTS_INTERNAL_EMBEDDED_H_
