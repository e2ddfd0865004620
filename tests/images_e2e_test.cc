// Images end to end: a real OCI registry (Debian's docker-registry) on
// loopback with TLS from a test CA and htpasswd auth, images pushed to it
// with Debian's skopeo (a multi-layer image with a whiteout, an opaque
// directory and a hard link, under a multi-arch index), pulled by vmmd and
// booted in real guests; templates saved from a sandbox, written as an
// archive that skopeo and umoci read; docker save archives loaded; every
// refusal checked by its message, with the store unchanged.
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using testing::BinaryPath;

constexpr char kUser[] = "puller";
constexpr char kPassword[] = "s3cret-pull-password";

std::string ImageDir() {
  const char* d = getenv("AIRLOCK_IMAGE_DIR");
  return d ? d : "";
}

class ImagesE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(dir_->path()));
    const std::string d = dir_->path();
    auto certs = testing::MakeTestCerts(d, {"localhost"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
    registry_ = testing::StartFixtureServer(
        d, "registry",
        {"python3", BinaryPath("tests/fixtures/registry.py"), "--dir", d + "/registry", "--tls",
         d + "/up.pem", d + "/up.key", "--htpasswd", absl::StrCat(kUser, ":", kPassword)});
    ASSERT_GT(registry_.port, 0) << ReadFileToString(d + "/registry.log")
                                 << ReadFileToString(d + "/registry/registry.log");
    host_ = absl::StrCat("localhost:", registry_.port);
    // vmmd trusts the test CA for this registry only (docker's certs.d).
    ASSERT_TRUE(MakeDirs(d + "/certs.d/" + host_, 0755).ok());
    ASSERT_EQ(RunCommand({"cp", d + "/ca.pem", d + "/certs.d/" + host_ + "/ca.crt"}).exit_code, 0);
    ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
    std::ofstream(d + "/state/vmmd.conf") << "registry-certs-dir = " << d << "/certs.d\n";
    // The images: built from the base template's layer so they boot.
    std::string base = ImageDir() + "/templates/base/oci";
    for (const char* kind : {"test", "evil"}) {
      auto made = RunCommand({"python3", BinaryPath("tests/fixtures/make_image.py"), "--base",
                              base, "--out", absl::StrCat(d, "/", kind), "--kind", kind});
      ASSERT_EQ(made.exit_code, 0) << made.err;
      if (std::string(kind) == "test") {
        amd64_digest_ = std::string(absl::StripAsciiWhitespace(made.out));
      }
      Push(absl::StrCat(kind, ":v1"), absl::StrCat("airlock/", kind, ":v1"));
    }
    auto set = Airlock({"secret", "set", "--registry", host_, "-u", kUser, "-t", kPassword});
    ASSERT_EQ(set.exit_code, 0) << set.out << set.err;
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    if (registry_.pid > 0) kill(registry_.pid, SIGTERM);
    delete env_;
    delete dir_;
  }

  // Push copies the layout d/<layout_ref> to the registry with skopeo.
  static void Push(const std::string& layout_ref, const std::string& repo) {
    const std::string d = dir_->path();
    std::string layout = layout_ref.substr(0, layout_ref.find(':'));
    auto r = RunCommand({"skopeo", "copy", "--all", "--dest-cert-dir", d + "/certs.d/" + host_,
                         "--dest-creds", absl::StrCat(kUser, ":", kPassword),
                         absl::StrCat("oci:", d, "/", layout, ":v1"),
                         absl::StrCat("docker://", host_, "/", repo)},
                        {}, "", 300);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  static CommandResult Airlock(const std::vector<std::string>& args,
                               const std::string& input = "") {
    return testing::RunAirlock(*env_, args, input, 900);
  }
  static nlohmann::json Images() {
    auto r = Airlock({"template", "ls", "--json"});
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  static std::vector<std::string> Names() {
    std::vector<std::string> out;
    for (const auto& img : Images()) {
      for (const auto& n : img["names"]) out.push_back(n);
    }
    return out;
  }
  static std::string Blobs() {
    return RunCommand({"sh", "-c", "ls " + dir_->path() + "/state/images/blobs/sha256 | sort"}).out;
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
  static testing::FixtureServer registry_;
  static std::string host_;
  static std::string amd64_digest_;
};

testing::ShortTempDir* ImagesE2ETest::dir_;
std::map<std::string, std::string>* ImagesE2ETest::env_;
testing::FixtureServer ImagesE2ETest::registry_;
std::string ImagesE2ETest::host_;
std::string ImagesE2ETest::amd64_digest_;

TEST_F(ImagesE2ETest, PullByTagBootsWithItsLayersAndConfig) {
  std::string ref = host_ + "/airlock/test:v1";
  auto pull = Airlock({"template", "pull", ref});
  ASSERT_EQ(pull.exit_code, 0) << pull.out << pull.err;
  // The index's linux/amd64 entry is what was stored.
  EXPECT_NE(pull.out.find(amd64_digest_), std::string::npos) << pull.out;
  auto run = Airlock({"run", "--rm", "-t", ref, "shell", "--", "sh", "-c",
                      "pwd; cat keep; ls gone 2>&1; ls opq; echo env=$AIRLOCK_IMAGE_TEST; "
                      "[ $(stat -c %i keep) = $(stat -c %i linked) ] && echo hardlinked"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("/opt/airlock-test\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("kept\n"), std::string::npos) << run.out;
  // The whiteout of layer 3 removed layer 2's file; the opaque directory
  // holds only what layer 3 put there.
  EXPECT_NE(run.out.find("ls: cannot access 'gone': No such file or directory"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("\nnew\nenv=yes\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("hardlinked"), std::string::npos) << run.out;
}

TEST_F(ImagesE2ETest, PullByDigestAndShortNamesResolve) {
  std::string ref = absl::StrCat(host_, "/airlock/test@", amd64_digest_);
  auto pull = Airlock({"template", "pull", "-q", ref});
  ASSERT_EQ(pull.exit_code, 0) << pull.err;
  std::string id = std::string(absl::StripAsciiWhitespace(pull.out));
  ASSERT_EQ(id.rfind("sha256:", 0), 0u) << id;
  // An id prefix finds the image as well as its name.
  auto inspect = Airlock({"template", "inspect", id.substr(7, 10)});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  auto j = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(j["id"], id);
  EXPECT_EQ(j["digest"], amd64_digest_);
  EXPECT_EQ(j["layers"].size(), 3u);
  EXPECT_EQ(j["config"]["working_dir"], "/opt/airlock-test");
}

// The token flow: a registry whose WWW-Authenticate sends clients to a
// token service (JWTs it verifies against the signer's certificate).
TEST_F(ImagesE2ETest, TheTokenFlowWorksWithStoredCredentialsAndNotWithout) {
  const std::string d = dir_->path();
  auto reg = testing::StartFixtureServer(
      d, "tokenreg",
      {"python3", BinaryPath("tests/fixtures/registry.py"), "--dir", d + "/tokenreg", "--tls",
       d + "/up.pem", d + "/up.key", "--token", absl::StrCat(kUser, ":", kPassword)});
  ASSERT_GT(reg.port, 0) << ReadFileToString(d + "/tokenreg.log");
  std::string host = absl::StrCat("localhost:", reg.port);
  ASSERT_TRUE(MakeDirs(d + "/certs.d/" + host, 0755).ok());
  ASSERT_EQ(RunCommand({"cp", d + "/ca.pem", d + "/certs.d/" + host + "/ca.crt"}).exit_code, 0);
  auto push = RunCommand({"skopeo", "copy", "--all", "--dest-cert-dir", d + "/certs.d/" + host,
                          "--dest-creds", absl::StrCat(kUser, ":", kPassword),
                          "oci:" + d + "/test:v1", "docker://" + host + "/airlock/tok:v1"},
                         {}, "", 300);
  ASSERT_EQ(push.exit_code, 0) << push.err;
  auto anonymous = Airlock({"template", "pull", host + "/airlock/tok:v1"});
  EXPECT_EQ(anonymous.exit_code, 1);
  EXPECT_NE(anonymous.err.find("refused anonymous access to airlock/tok; store credentials with "
                               "`airlock secret set --registry " + host + "`"),
            std::string::npos)
      << anonymous.err;
  ASSERT_EQ(Airlock({"secret", "set", "--registry", host, "-u", kUser, "-t", "nope"}).exit_code, 0);
  auto wrong = Airlock({"template", "pull", host + "/airlock/tok:v1"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("the token service of registry " + host +
                           " refused the stored credentials"),
            std::string::npos)
      << wrong.err;
  ASSERT_EQ(Airlock({"secret", "set", "--registry", host, "-u", kUser, "-t", kPassword}).exit_code,
            0);
  auto pull = Airlock({"template", "pull", host + "/airlock/tok:v1"});
  EXPECT_EQ(pull.exit_code, 0) << pull.err;
  kill(reg.pid, SIGTERM);
}

TEST_F(ImagesE2ETest, WrongCredentialsAreAClearErrorAndStoreNothing) {
  ASSERT_EQ(Airlock({"secret", "set", "--registry", host_, "-u", kUser, "-t", "wrong"}).exit_code,
            0);
  std::string before = Blobs();
  auto pull = Airlock({"template", "pull", host_ + "/airlock/evil:v1"});
  EXPECT_EQ(pull.exit_code, 1);
  EXPECT_NE(pull.err.find("refused the stored credentials"), std::string::npos) << pull.err;
  EXPECT_EQ(Blobs(), before);
  ASSERT_EQ(
      Airlock({"secret", "set", "--registry", host_, "-u", kUser, "-t", kPassword}).exit_code, 0);
}

TEST_F(ImagesE2ETest, ALayerWithADotDotEntryIsRefusedAndNothingIsNamed) {
  std::string before = Blobs();
  auto pull = Airlock({"template", "pull", host_ + "/airlock/evil:v1"});
  EXPECT_EQ(pull.exit_code, 1);
  EXPECT_NE(pull.err.find("layer entry \"../escape\" points outside the image's root"),
            std::string::npos)
      << pull.err;
  for (const auto& n : Names()) EXPECT_EQ(n.find("evil"), std::string::npos) << n;
  EXPECT_EQ(Blobs(), before);
}

TEST_F(ImagesE2ETest, ABlobWhoseDigestDoesNotMatchIsRefused) {
  const std::string d = dir_->path();
  auto made = RunCommand({"python3", BinaryPath("tests/fixtures/make_image.py"), "--base",
                          ImageDir() + "/templates/base/oci", "--out", d + "/big", "--kind", "big",
                          "--big-mib", "1"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  Push("big:v1", "airlock/tampered:v1");
  // Tamper with the last layer in the registry's own storage: same size,
  // other bytes.
  auto m = nlohmann::json::parse(
      ReadFileToString(d + "/big/blobs/sha256/" + made.out.substr(7, 64)));
  std::string layer = m["layers"].back()["digest"];
  std::string data = absl::StrCat(d, "/registry/data/docker/registry/v2/blobs/sha256/",
                                  layer.substr(7, 2), "/", layer.substr(7), "/data");
  ASSERT_EQ(RunCommand({"sh", "-c", "printf XXXXXXXX | dd of=" + data +
                                        " bs=1 seek=100 conv=notrunc status=none"})
                .exit_code,
            0);
  std::string before = Blobs();
  auto pull = Airlock({"template", "pull", host_ + "/airlock/tampered:v1"});
  EXPECT_EQ(pull.exit_code, 1);
  EXPECT_NE(pull.err.find("blob digest mismatch: expected " + layer), std::string::npos)
      << pull.err;
  EXPECT_EQ(Blobs(), before);
}

TEST_F(ImagesE2ETest, BadReferencesAndUnknownImagesAreClearErrors) {
  auto names = Names();
  auto bad = Airlock({"template", "pull", "Upper/Case:x"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("invalid image reference \"Upper/Case:x\""), std::string::npos)
      << bad.err;
  auto unknown = Airlock({"run", "--rm", "--pull", "never", "-t", "no-such:v9", "shell", "--",
                          "true"});
  EXPECT_EQ(unknown.exit_code, 125);
  EXPECT_NE(unknown.err.find("no image \"no-such:v9\" in the store"), std::string::npos)
      << unknown.err;
  auto missing = Airlock({"run", "--rm", "-t", host_ + "/airlock/absent:v1", "shell", "--",
                          "true"});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << missing.err;
  auto unreachable = Airlock({"template", "pull", "localhost:1/x/y:z"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_NE(unreachable.err.find("cannot reach registry localhost:1"), std::string::npos)
      << unreachable.err;
  EXPECT_EQ(Names(), names);
}

TEST_F(ImagesE2ETest, AFullDiskDuringPullLeavesTheStoreUnchanged) {
  const std::string tmp = dir_->path() + "/state/images/tmp";
  ASSERT_EQ(mount("tmpfs", tmp.c_str(), "tmpfs", 0, "size=1m"), 0) << strerror(errno);
  auto names = Names();
  std::string before = Blobs();
  // A name not stored yet, so its layers are fetched (the base layer is
  // shared with what the store has: pull the 1 MiB-layer image).
  const std::string d = dir_->path();
  auto made = RunCommand({"python3", BinaryPath("tests/fixtures/make_image.py"), "--base",
                          ImageDir() + "/templates/base/oci", "--out", d + "/big2", "--kind",
                          "big", "--big-mib", "4"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  Push("big2:v1", "airlock/big:v1");
  auto pull = Airlock({"template", "pull", host_ + "/airlock/big:v1"});
  umount2(tmp.c_str(), MNT_DETACH);
  EXPECT_EQ(pull.exit_code, 1);
  EXPECT_NE(pull.err.find("No space left on device"), std::string::npos) << pull.err;
  EXPECT_EQ(Names(), names);
  EXPECT_EQ(Blobs(), before);
  // With space back, the same pull works.
  auto again = Airlock({"template", "pull", host_ + "/airlock/big:v1"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(ImagesE2ETest, SavedTemplateKeepsTheSandboxsFilesAndIsARealOciArchive) {
  const std::string d = dir_->path();
  auto c = Airlock({"create", "--name", "saver", "shell"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto w = Airlock({"exec", "saver", "--", "sh", "-c",
                    "echo kept-by-save > /home/agent/workspace/note.txt && sudo rm /etc/motd"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  // Running: refused without --force (stdin is not a terminal here).
  auto refused = Airlock({"template", "save", "saver", "saved:v1"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("sandbox saver is running"), std::string::npos) << refused.err;
  auto save = Airlock({"template", "save", "--force", "saver", "saved:v1", "-o",
                       d + "/saved.tar", "--description", "e2e"});
  ASSERT_EQ(save.exit_code, 0) << save.err;
  // In use: the image cannot go while a sandbox uses it... the saved one
  // is used by none yet, but base is used by `saver`.
  auto rm_base = Airlock({"template", "rm", "base"});
  EXPECT_EQ(rm_base.exit_code, 1);
  EXPECT_NE(rm_base.err.find("is used by sandbox saver"), std::string::npos) << rm_base.err;
  ASSERT_EQ(Airlock({"rm", "-f", "saver"}).exit_code, 0);
  auto run = Airlock({"run", "--name", "fromsave", "-t", "saved:v1", "shell", "--", "sh", "-c",
                      "cat note.txt; ls /etc/motd 2>&1"});
  ASSERT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.out.find("kept-by-save\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("No such file or directory"), std::string::npos) << run.out;
  auto rm_used = Airlock({"template", "rm", "saved:v1"});
  EXPECT_EQ(rm_used.exit_code, 1);
  EXPECT_NE(rm_used.err.find("is used by sandbox fromsave"), std::string::npos) << rm_used.err;
  ASSERT_EQ(Airlock({"rm", "-f", "fromsave"}).exit_code, 0);
  // The archive: skopeo reads it both ways, umoci unpacks it.
  auto oci = RunCommand({"skopeo", "inspect", "oci-archive:" + d + "/saved.tar"});
  EXPECT_EQ(oci.exit_code, 0) << oci.err;
  auto docker = RunCommand({"skopeo", "inspect", "docker-archive:" + d + "/saved.tar"});
  EXPECT_EQ(docker.exit_code, 0) << docker.err;
  auto unpack = RunCommand(
      {"sh", "-c",
       "set -e; mkdir -p " + d + "/u && cd " + d + "/u && tar xf ../saved.tar && umoci unpack "
       "--image " + d + "/u:v1 " + d + "/bundle && cat " + d +
           "/bundle/rootfs/home/agent/workspace/note.txt"});
  EXPECT_EQ(unpack.exit_code, 0) << unpack.err;
  EXPECT_EQ(unpack.out, "kept-by-save\n");
  auto rm = Airlock({"template", "rm", "saved:v1"});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_NE(rm.out.find("Untagged: saved:v1"), std::string::npos) << rm.out;
}

TEST_F(ImagesE2ETest, ADockerSaveArchiveLoadsAndBoots) {
  const std::string d = dir_->path();
  auto copy = RunCommand({"skopeo", "copy", "oci:" + d + "/test:v1",
                          "docker-archive:" + d + "/docker.tar:dockerfmt:v1"},
                         {}, "", 300);
  ASSERT_EQ(copy.exit_code, 0) << copy.err;
  auto load = Airlock({"template", "load", d + "/docker.tar"});
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_NE(load.out.find("Loaded image: dockerfmt:v1"), std::string::npos) << load.out;
  auto run = Airlock({"run", "--rm", "-t", "dockerfmt:v1", "shell", "--", "cat",
                      "/opt/airlock-test/keep"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "kept\n");
}

TEST_F(ImagesE2ETest, VmmdKilledDuringAPullLosesNothingAndTheStoreStillWorks) {
  auto names = Names();
  // A fresh image with a big layer, so the pull is under way for a while.
  const std::string d = dir_->path();
  auto made = RunCommand({"python3", BinaryPath("tests/fixtures/make_image.py"), "--base",
                          ImageDir() + "/templates/base/oci", "--out", d + "/big3", "--kind",
                          "big", "--big-mib", "64"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  Push("big3:v1", "airlock/big3:v1");
  std::vector<std::string> argv = {"env"};
  for (const auto& [k, v] : *env_) argv.push_back(k + "=" + v);
  argv.insert(argv.end(),
              {BinaryPath("cli/airlock"), "template", "pull", host_ + "/airlock/big3:v1"});
  auto bg = SpawnDetached(argv, d + "/bgpull.log");
  ASSERT_TRUE(bg.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  std::string pid = ReadFileToString(d + "/run/vmmd.pid");
  ASSERT_FALSE(pid.empty());
  kill(std::atoi(pid.c_str()), SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The next command starts vmmd again: the store is as before the pull.
  EXPECT_EQ(Names(), names);
  auto again = Airlock({"template", "pull", host_ + "/airlock/big3:v1"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  auto tmp = RunCommand({"sh", "-c", "ls -A " + d + "/state/images/tmp | wc -l"});
  EXPECT_EQ(tmp.out, "0\n");
}

// Last: with the registry gone, a cached image still boots (--pull
// missing finds it in the store and asks nothing).
TEST_F(ImagesE2ETest, ACachedImageBootsWithTheRegistryGone) {
  kill(registry_.pid, SIGTERM);
  registry_.pid = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto run = Airlock({"run", "--rm", "-t", host_ + "/airlock/test:v1", "shell", "--", "cat",
                      "/opt/airlock-test/keep"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "kept\n");
  auto always = Airlock({"run", "--rm", "--pull", "always", "-t", host_ + "/airlock/test:v1",
                         "shell", "--", "true"});
  EXPECT_EQ(always.exit_code, 125);
  EXPECT_NE(always.err.find("cannot reach registry " + host_), std::string::npos) << always.err;
}

}  // namespace
}  // namespace airlock
