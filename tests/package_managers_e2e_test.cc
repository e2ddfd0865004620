// Real package managers inside a sandbox, against the real registries this
// machine reaches (Debian's archive and the npm registry), through proxyd
// under the balanced preset. On a network like this one those names
// resolve into a reserved range and TLS is re-signed by a CA only the host
// trusts; tools/configure_network.sh writes the operator settings for
// that (trusted-ranges, terminate-tls) into this test's proxyd.conf, as
// setup does for a real install.
#include <map>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

using testing::BinaryPath;

class PackageManagersE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(dir_->path()));
    const std::string d = dir_->path();
    ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
    auto conf = RunCommand({"bash", BinaryPath("tools/configure_network.sh"), d + "/state"});
    ASSERT_EQ(conf.exit_code, 0) << conf.err;
    std::cerr << conf.err;
    ASSERT_EQ(Airlock({"policy", "init", "balanced"}).exit_code, 0);
    // apt only reads: an HTTP-level deny makes proxyd parse and decide each
    // of its requests (where an encoded '~' used to get 400).
    ASSERT_EQ(Airlock({"policy", "deny", "network", "--method", "POST,PUT,DELETE",
                       "deb.debian.org"})
                  .exit_code,
              0);
    auto c = Airlock({"create", "--name", "pkgs", "shell"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    // Node.js and npm come with the agent template (installing them with
    // apt is ~300 packages: minutes of guest dpkg under TCG, no more path).
    auto n = Airlock({"create", "--name", "node", "--template", "agent", "shell"});
    ASSERT_EQ(n.exit_code, 0) << n.err;
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    delete env_;
    delete dir_;
  }
  static CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(*env_, args, "", 1500);
  }
  static CommandResult Guest(const std::string& script, const std::string& sandbox = "pkgs") {
    return Airlock({"exec", sandbox, "--", "bash", "-c", script});
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
};

testing::ShortTempDir* PackageManagersE2ETest::dir_;
std::map<std::string, std::string>* PackageManagersE2ETest::env_;

// libjs-jquery's version has a '~' (3.6.1+dfsg+~3.5.14-1), which apt
// sends percent-encoded in the .deb's path.
TEST_F(PackageManagersE2ETest, AptInstallsAPackageWhoseVersionHasATilde) {
  auto r = Guest(
      "set -e; sudo apt-get update -q >/dev/null; sudo DEBIAN_FRONTEND=noninteractive "
      "apt-get install -y -q --no-install-recommends libjs-jquery >/dev/null; "
      "dpkg-query -W -f='${Version}\\n' libjs-jquery; test -s /usr/share/javascript/jquery/"
      "jquery.min.js");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("+~"), std::string::npos) << r.out;
  // apt asked for the .deb with the '~' encoded, and it was decided and
  // allowed like any other request.
  auto log = Airlock({"policy", "log", "--sandbox", "pkgs", "--limit", "100000"});
  EXPECT_NE(log.out.find("allow    transparent  deb.debian.org:80 GET /debian/pool/main/n/node-jquery/"
                         "libjs-jquery_3.6.1"),
            std::string::npos)
      << log.out.substr(0, 3000);
  EXPECT_NE(log.out.find("%7e3.5.14-1_all.deb"), std::string::npos) << log.out.substr(0, 3000);
}

TEST_F(PackageManagersE2ETest, NpmInstallsAScopedPackageOverTerminatedTls) {
  auto r = Guest(
      "set -e; sudo npm install -g -q @isaacs/string-locale-compare >/dev/null 2>&1 || "
      "{ sudo npm install -g @isaacs/string-locale-compare; exit 1; }; "
      "node -e \"console.log(typeof require('/usr/local/lib/node_modules/@isaacs/"
      "string-locale-compare'))\"",
      "node");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "function\n");
  auto log = Airlock({"policy", "log", "--sandbox", "node", "--limit", "100000"});
  EXPECT_NE(log.out.find("registry.npmjs.org:443 GET /@isaacs%2fstring-locale-compare"),
            std::string::npos)
      << log.out.substr(0, 2000);
}

}  // namespace
}  // namespace airlock
