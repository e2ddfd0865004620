// Test-only access to common/kit/testdata from a test's runfiles.
#ifndef AIRLOCK_COMMON_KIT_INTERNAL_TESTDATA_H_
#define AIRLOCK_COMMON_KIT_INTERNAL_TESTDATA_H_

#include <fstream>
#include <sstream>
#include <string>

namespace airlock::kit::internal {

// TestdataPath is where a fixture sits relative to the test's working
// directory (the workspace root of its runfiles).
inline std::string TestdataPath(const std::string& name) { return "common/kit/testdata/" + name; }

// ReadTestdata returns a fixture's bytes, or "" when it cannot be read
// (the test's parse then fails loudly).
inline std::string ReadTestdata(const std::string& name) {
  std::ifstream in(TestdataPath(name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace airlock::kit::internal

#endif  // AIRLOCK_COMMON_KIT_INTERNAL_TESTDATA_H_
