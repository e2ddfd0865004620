// The shared paths of a direct-mode sandbox as the e2e tests make them,
// and the checks such a sandbox must pass however it started (booted with
// the shares, or restored with them plugged in).
#ifndef AIRLOCK_TESTS_SHARE_CHECKS_H_
#define AIRLOCK_TESTS_SHARE_CHECKS_H_

#include <map>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace airlock::testing {

struct SharedPaths {
  std::string ws;      // the workspace, the agent's (uid 1000), with from-host.txt
  std::string ro;      // a directory shared read-only, with ro.txt
  std::string single;  // a single file shared read-only
  // What `run` or `create` takes after the image: ws, ro:ro, single:ro.
  std::vector<std::string> Args() const { return {ws, ro + ":ro", single + ":ro"}; }
};

// MakeSharedPaths makes them under `dir`.
SharedPaths MakeSharedPaths(const std::string& dir);

// The command the sandbox is run with for ExpectSharesWork.
inline constexpr char kSharedPathsCommand[] =
    "pwd; cat from-host.txt; echo from guest > from-guest.txt";

// ExpectSharesWork checks sandbox `name`, run with Args() and
// kSharedPathsCommand (`run` is what that printed): the workspace is the
// working directory and writable both ways while it runs, the read-only
// paths are readable, and guest root cannot write them even after
// remounting read-write (the host enforces it: EROFS).
void ExpectSharesWork(const std::map<std::string, std::string>& env, const std::string& name,
                      const SharedPaths& paths, const CommandResult& run);

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTS_SHARE_CHECKS_H_
