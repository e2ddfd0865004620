// FUZZ_CHECK stops a fuzz target with a message when a property it checks
// does not hold: libFuzzer (and the replay test) then report the input.
#ifndef AIRLOCK_FUZZ_FUZZ_CHECK_H_
#define AIRLOCK_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#endif  // AIRLOCK_FUZZ_FUZZ_CHECK_H_
