#include "tests/share_checks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::testing {

SharedPaths MakeSharedPaths(const std::string& dir) {
  SharedPaths p{dir + "/ws", dir + "/ro", dir + "/single.conf"};
  for (const auto& d : {p.ws, p.ro}) EXPECT_EQ(mkdir(d.c_str(), 0755), 0) << d;
  std::ofstream(p.ws + "/from-host.txt") << "host data\n";
  std::ofstream(p.ro + "/ro.txt") << "read only\n";
  std::ofstream(p.single) << "one file\n";
  // The guest's agent user is uid 1000; the workspace is its.
  EXPECT_EQ(RunCommand({"chown", "-R", "1000:1000", p.ws}).exit_code, 0);
  return p;
}

void ExpectSharesWork(const std::map<std::string, std::string>& env, const std::string& name,
                      const SharedPaths& paths, const CommandResult& run) {
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, paths.ws + "\nhost data\n") << "the workspace is the default working dir";
  EXPECT_EQ(ReadFileToString(paths.ws + "/from-guest.txt"), "from guest\n");
  std::ofstream(paths.ws + "/later.txt") << "written while running\n";
  EXPECT_EQ(RunAirlock(env, {"exec", name, "--", "cat", paths.ws + "/later.txt"}).out,
            "written while running\n");
  EXPECT_EQ(RunAirlock(env, {"exec", name, "--", "cat", paths.ro + "/ro.txt"}).out,
            "read only\n");
  EXPECT_EQ(RunAirlock(env, {"exec", name, "--", "cat", paths.single}).out, "one file\n");
  // Read-only holds even for guest root after remounting read-write.
  auto write_ro = RunAirlock(env, {"exec", "-u", "root", name, "--", "sh", "-c",
                                   "mount -o remount,rw " + paths.ro + " 2>/dev/null; echo x > " +
                                       paths.ro + "/new.txt"});
  EXPECT_NE(write_ro.exit_code, 0);
  EXPECT_NE(write_ro.err.find("Read-only file system"), std::string::npos) << write_ro.err;
  EXPECT_NE(access((paths.ro + "/new.txt").c_str(), F_OK), 0);
  auto write_file =
      RunAirlock(env, {"exec", "-u", "root", name, "--", "sh", "-c", "echo x >> " + paths.single});
  EXPECT_NE(write_file.exit_code, 0);
  EXPECT_NE(write_file.err.find("Read-only file system"), std::string::npos) << write_file.err;
  EXPECT_EQ(ReadFileToString(paths.single), "one file\n");
}

}  // namespace airlock::testing
