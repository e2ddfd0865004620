// Docker end to end: a real dockerd in a real guest (`airlock create
// --docker`), with nothing of the host's Docker. Images are made offline
// inside the guest (`docker import` of a static busybox and curl), builds
// and containers reach a loopback upstream only as the policy says (through
// proxyd, logged under the sandbox's name), `docker pull` comes from a real
// registry (Debian's docker-registry, TLS from a test CA, htpasswd) with
// the credential proxyd places, compose runs two services, and the engine's
// disk survives stop/start and goes with rm.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using testing::BinaryPath;

constexpr char kUser[] = "puller";
constexpr char kPassword[] = "s3cret-docker-pull-password";

// Makes box:1 inside the guest from its own files: busybox (sh, wget,
// httpd, nc) and curl with its libraries, the public CA bundle, and a page
// for httpd to serve.
constexpr char kMakeBox[] = R"SH(set -e
r=$(mktemp -d)
mkdir -p $r/bin $r/tmp $r/www $r/etc/ssl/certs
cp "$(command -v busybox)" $r/bin/busybox
for a in sh cat wget httpd sleep nc; do ln -s busybox $r/bin/$a; done
for f in /usr/bin/curl $(ldd /usr/bin/curl | grep -o '/[^ ]*'); do
  mkdir -p $r$(dirname $f); cp -L $f $r$f
done
echo "served by web" > $r/www/index.html
# The public CAs only, as an image from a registry has them: not Airlock's.
cat /usr/share/ca-certificates/mozilla/*.crt > $r/etc/ssl/certs/ca-certificates.crt
tar -C $r -c . | docker import --change 'ENV PATH=/usr/bin:/bin' - box:1 >/dev/null
rm -rf $r
docker image inspect box:1 --format '{{.Id}}'
)SH";

class DockerE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(dir_->path()));
    const std::string d = dir_->path();
    host_docker_before_ = HostDockerState();
    auto certs = testing::MakeTestCerts(d, {"registry.test", "tls.test"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
    upstream_ = testing::StartFixtureServer(
        d, "upstream", {"python3", BinaryPath("tests/fixtures/upstream.py")});
    ASSERT_GT(upstream_.port, 0);
    tls_upstream_ = testing::StartFixtureServer(
        d, "tls-upstream",
        {"python3", BinaryPath("tests/fixtures/upstream.py"), "--tls", d + "/up.pem",
         d + "/up.key"});
    ASSERT_GT(tls_upstream_.port, 0);
    registry_ = testing::StartFixtureServer(
        d, "registry",
        {"python3", BinaryPath("tests/fixtures/registry.py"), "--dir", d + "/registry", "--tls",
         d + "/up.pem", d + "/up.key", "--htpasswd", absl::StrCat(kUser, ":", kPassword)});
    ASSERT_GT(registry_.port, 0) << ReadFileToString(d + "/registry.log");
    registry_host_ = absl::StrCat("registry.test:", registry_.port);
    auto made = RunCommand({"python3", BinaryPath("tests/fixtures/make_image.py"), "--out",
                            d + "/scratch", "--kind", "scratch", "--big-mib", "2"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    auto pushed = RunCommand(
        {"skopeo", "copy", "--dest-tls-verify=false", "--dest-creds",
         absl::StrCat(kUser, ":", kPassword), absl::StrCat("oci:", d, "/scratch:v1"),
         absl::StrCat("docker://localhost:", registry_.port, "/airlock/scratch:v1")},
        {}, "", 300);
    ASSERT_EQ(pushed.exit_code, 0) << pushed.out << pushed.err;
    ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
    std::ofstream(d + "/state/proxyd.conf")
        << "resolve = up.test=127.0.0.1,down.test=127.0.0.1,registry.test=127.0.0.1,"
           "tls.test=127.0.0.1\n"
        << "upstream-ca = " << d << "/ca.pem\n"
        // As on a network that re-signs TLS: proxyd terminates it, so a
        // client must trust Airlock's CA.
        << "terminate-tls = tls.test\n";
    ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
    up_ = absl::StrCat("up.test:", upstream_.port);
    ASSERT_EQ(Airlock({"policy", "allow", "network", up_}).exit_code, 0);
    tls_ = absl::StrCat("tls.test:", tls_upstream_.port);
    ASSERT_EQ(Airlock({"policy", "allow", "network", tls_}).exit_code, 0);
    auto secret = Airlock({"secret", "set", "--registry", registry_host_, "-u", kUser, "-t",
                           kPassword});
    ASSERT_EQ(secret.exit_code, 0) << secret.out << secret.err;
    auto created = Airlock({"create", "--docker", "--docker-disk", "2g", "--name", "dock", "shell"});
    ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    for (auto* f : {&upstream_, &tls_upstream_, &registry_}) {
      if (f->pid > 0) kill(f->pid, SIGTERM);
    }
    delete env_;
    delete dir_;
  }
  static CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(*env_, args, "", 900);
  }
  static CommandResult Sh(const std::string& script) {
    return Airlock({"exec", "dock", "--", "sh", "-c", script});
  }
  static std::string LogOf(const std::string& sandbox) {
    return Airlock({"policy", "log", "--sandbox", sandbox, "--limit", "100000"}).out;
  }
  // What the host's own Docker has, to show the suite leaves it alone.
  static std::string HostDockerState() {
    return RunCommand({"sh", "-c",
                       "ls -la --time-style=full-iso /var/lib/docker /var/run/docker.sock "
                       "2>&1 | sort"})
        .out;
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
  static testing::FixtureServer upstream_, tls_upstream_, registry_;
  static std::string registry_host_, up_, tls_, host_docker_before_;
};

testing::ShortTempDir* DockerE2ETest::dir_;
std::map<std::string, std::string>* DockerE2ETest::env_;
testing::FixtureServer DockerE2ETest::upstream_;
testing::FixtureServer DockerE2ETest::tls_upstream_;
testing::FixtureServer DockerE2ETest::registry_;
std::string DockerE2ETest::registry_host_;
std::string DockerE2ETest::up_;
std::string DockerE2ETest::tls_;
std::string DockerE2ETest::host_docker_before_;

// Tests run in file order on the one sandbox "dock".

TEST_F(DockerE2ETest, TheGuestsOwnEngineOnItsOwnDisk) {
  auto r = Sh("id -nG; docker info --format '{{.Name}} {{.Driver}} {{.CgroupVersion}}'; "
              "grep ' /var/lib/docker ' /proc/mounts | cut -d' ' -f1,3");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The agent user reaches the engine without sudo; the engine is the
  // guest's (its name is the sandbox's hostname), on the docker disk.
  EXPECT_TRUE(absl::StrContains(r.out, "docker")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "dock overlay2 2")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "/dev/vd")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, " ext4")) << r.out;
  struct stat st;
  const std::string disk = dir_->path() + "/state/sandboxes/dock/docker.img";
  ASSERT_EQ(stat(disk.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, off_t{2048} << 20);
}

TEST_F(DockerE2ETest, ImportAndRunOfflineWithTheExitCodePassedThrough) {
  auto box = Sh(kMakeBox);
  ASSERT_EQ(box.exit_code, 0) << box.out << box.err;
  EXPECT_TRUE(absl::StartsWith(box.out, "sha256:")) << box.out;
  auto r = Sh("docker run --rm box:1 sh -c 'echo hello from a container; exit 7'");
  EXPECT_EQ(r.exit_code, 7) << r.out << r.err;
  EXPECT_EQ(r.out, "hello from a container\n");
}

TEST_F(DockerE2ETest, BuildRunStepsGoThroughThePolicy) {
  std::string dockerfile = absl::StrCat(
      "FROM box:1\n"
      "RUN curl -sS -m 30 -o /allowed -w 'allowed %{http_code}\\n' http://",
      up_, "/from-build\n",
      "RUN curl -sS -m 30 -w 'denied %{http_code}\\n' http://down.test:", upstream_.port,
      "/from-build > /denied; cat /denied\n");
  auto r = Sh(absl::StrCat("set -e; d=$(mktemp -d); cd $d; cat > Dockerfile <<'EOF'\n", dockerfile,
                           "EOF\ndocker build --progress=plain -t built:1 . 2>&1; "
                           "docker run --rm built:1 cat /allowed"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "allowed 200")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "upstream saw GET /from-build host=" + up_)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "denied 403")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "blocked down.test:")) << r.out;
  std::string log = LogOf("dock");
  EXPECT_TRUE(absl::StrContains(log, "allow    transparent  " + up_)) << log;
  EXPECT_TRUE(absl::StrContains(log, "deny     transparent  down.test:")) << log;
}

// Where proxyd terminates TLS, a build trusts Airlock's CA the two ways the
// README gives (a build arg, a BuildKit secret); without it, it does not.
TEST_F(DockerE2ETest, BuildsReachTerminatedTlsWithAirlocksCa) {
  std::string url = absl::StrCat("https://", tls_, "/tls-build");
  std::string dockerfile = absl::StrCat(
      "FROM box:1\n"
      "ARG AIRLOCK_CA\n"
      "RUN --mount=type=secret,id=airlock-ca,target=/etc/ssl/certs/ca-certificates.crt "
      "curl -sS -m 30 ", url, "/secret > /secret\n",
      "RUN printf '%s\\n' \"$AIRLOCK_CA\" >> /etc/ssl/certs/ca-certificates.crt && "
      "curl -sS -m 30 ", url, "/arg > /arg\n");
  auto r = Sh(absl::StrCat(
      "set -e; ca=/usr/local/share/ca-certificates/airlock-egress-ca.crt; d=$(mktemp -d); "
      "cd $d; cat > Dockerfile <<'EOF'\n", dockerfile,
      "EOF\ndocker build -q --build-arg AIRLOCK_CA=\"$(cat $ca)\" "
      "--secret id=airlock-ca,src=$ca -t tlsbuilt:1 . >/dev/null; "
      "docker run --rm tlsbuilt:1 cat /secret /arg; "
      "docker run --rm box:1 curl -sS -m 30 ", url, "/without 2>&1 || echo \"without exit $?\""));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "upstream saw GET /tls-build/secret host=" + tls_)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "upstream saw GET /tls-build/arg host=" + tls_)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "without exit 60")) << r.out;
}

TEST_F(DockerE2ETest, ContainersReachNothingTheGuestCannot) {
  // The host's loopback is not the container's (nothing listens on the
  // container's own); a private address is refused by proxyd like any
  // unlisted destination.
  auto r = Sh(absl::StrCat(
      "docker run --rm box:1 sh -c '"
      "curl -s -m 20 -o /dev/null -w \"loopback %{http_code}\\n\" http://127.0.0.1:",
      upstream_.port, "/; echo \"loopback exit $?\"; "
      "curl -s -m 20 -w \" private %{http_code}\\n\" http://10.0.2.2:", upstream_.port, "/'"));
  EXPECT_TRUE(absl::StrContains(r.out, "loopback exit 7")) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "blocked 10.0.2.2:")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, " private 403")) << r.out;
  std::string log = LogOf("dock");
  EXPECT_TRUE(absl::StrContains(log, "deny     transparent  10.0.2.2:")) << log;
}

TEST_F(DockerE2ETest, PullFromTheRegistryOnlyWithARuleAndWithTheCredentialProxydPlaces) {
  std::string ref = registry_host_ + "/airlock/scratch:v1";
  auto denied = Sh("docker pull " + ref + " 2>&1");
  EXPECT_NE(denied.exit_code, 0) << denied.out;
  EXPECT_TRUE(absl::StrContains(denied.out, "403") || absl::StrContains(denied.out, "Forbidden"))
      << denied.out;
  EXPECT_TRUE(absl::StrContains(LogOf("dock"), "deny     forward      " + registry_host_))
      << LogOf("dock");
  ASSERT_EQ(Airlock({"policy", "allow", "network", registry_host_}).exit_code, 0);
  // No `docker login`: the guest never holds the password (searched as
  // root, so no directory is skipped for want of permission).
  auto pulled = Sh("docker pull " + ref + " >/dev/null && docker image inspect " + ref +
                   " --format '{{.Size}}'");
  auto leaked = Airlock({"exec", "-u", "root", "dock", "--", "sh", "-c",
                         std::string("grep -rl -D skip ") + kPassword +
                             " /etc /home /root /var/lib/docker /var/log /tmp; echo \"grep $?\""});
  EXPECT_EQ(leaked.out, "grep 1\n") << leaked.out << leaked.err;
  ASSERT_EQ(pulled.exit_code, 0) << pulled.out << pulled.err;
  EXPECT_GT(std::stoll(pulled.out), 2000000) << pulled.out;
  // The registry answers 401 to a request without the credential (its log
  // shows one for the fixture's own probe), so the pull above got through
  // with the credential proxyd placed; the manifest was served.
  std::string reglog = ReadFileToString(dir_->path() + "/registry/registry.log");
  EXPECT_TRUE(absl::StrContains(reglog, "/v2/airlock/scratch/manifests/v1 HTTP/1.1\" 200"))
      << reglog.substr(0, 3000);
}

TEST_F(DockerE2ETest, ComposeUpOfTwoServicesWhereOneCallsTheOther) {
  auto r = Sh(R"SH(set -e; d=$(mktemp -d); cd $d; cat > compose.yaml <<'EOF'
services:
  web:
    image: box:1
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
  client:
    image: box:1
    depends_on: [web]
    command: ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do wget -qO- http://web:8080/ && exit 0; sleep 1; done; exit 1"]
EOF
docker compose -p demo up --abort-on-container-exit --exit-code-from client 2>&1
docker compose -p demo down >/dev/null 2>&1)SH");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "served by web")) << r.out;
}

TEST_F(DockerE2ETest, ImagesSurviveStopAndStart) {
  ASSERT_EQ(Airlock({"stop", "dock"}).exit_code, 0);
  auto started = Airlock({"start", "dock"});
  ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
  auto r = Sh("docker images --format '{{.Repository}}:{{.Tag}}' | sort");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "box:1\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "built:1\n")) << r.out;
}

// vmmd killed while the guest boots (before or while dockerd starts): the
// restarted vmmd reattaches, the sandbox ends running with one engine, and
// one VM.
TEST_F(DockerE2ETest, VmmdKilledDuringBootEndsWithOneEngine) {
  const std::string d = dir_->path();
  ASSERT_EQ(Airlock({"stop", "dock"}).exit_code, 0);
  std::vector<std::string> argv = {"env"};
  for (const auto& [k, v] : *env_) argv.push_back(k + "=" + v);
  argv.insert(argv.end(), {BinaryPath("cli/airlock"), "start", "dock"});
  ASSERT_TRUE(SpawnDetached(argv, d + "/bgstart.log").ok());
  const std::string console = d + "/state/sandboxes/dock/console.log";
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ready = absl::StrContains(ReadFileToString(console), "AIRLOCK-AGENT-READY");
  }
  ASSERT_TRUE(ready) << ReadFileToString(console);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::string pid = ReadFileToString(d + "/run/vmmd.pid");
  ASSERT_FALSE(pid.empty());
  ASSERT_EQ(kill(std::atoi(pid.c_str()), SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The next command starts vmmd again; it reattaches to the live guest.
  std::string state;
  for (int i = 0; i < 300 && state != "running"; ++i) {
    auto ls = nlohmann::json::parse(Airlock({"ls", "--json"}).out, nullptr, false);
    if (ls.is_array() && ls.size() == 1) state = ls[0]["state"].get<std::string>();
    if (state == "failed") break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  ASSERT_EQ(state, "running") << Airlock({"ls", "--json"}).out;
  auto r = Sh("pgrep -c -x dockerd; docker info --format '{{.Name}}'");
  EXPECT_EQ(r.out, "1\ndock\n") << r.out << r.err;
  auto vms = RunCommand({"sh", "-c", "pgrep -f '[q]emu.*" + d + "/state/sandboxes/dock/' | wc -l"});
  EXPECT_EQ(vms.out, "1\n");
}

TEST_F(DockerE2ETest, BadDockerFlagsAreRefusedAndChangeNothing) {
  auto small = Airlock({"create", "--docker", "--docker-disk", "100m", "--name", "small", "shell"});
  EXPECT_EQ(small.exit_code, 1) << small.out << small.err;
  EXPECT_TRUE(absl::StrContains(small.err, "--docker-disk 100 MiB is out of range: give 512M to 16T"))
      << small.err;
  auto without = Airlock({"create", "--docker-disk", "1g", "--name", "without", "shell"});
  EXPECT_EQ(without.exit_code, 1) << without.err;
  EXPECT_TRUE(absl::StrContains(without.err, "add --docker, or leave --docker-disk out"))
      << without.err;
  auto unit = Airlock({"create", "--docker", "--docker-disk", "5x", "shell"});
  EXPECT_NE(unit.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(unit.err, "invalid --docker-disk: invalid disk size \"5x\""))
      << unit.err;
  auto zero = Airlock({"create", "--docker", "--docker-disk", "0", "shell"});
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(zero.err, "a disk of 0 bytes; give 512m to 16t")) << zero.err;
  auto both = Airlock({"create", "--docker", "--no-docker", "shell"});
  EXPECT_NE(both.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(both.err, "excludes")) << both.err;
  auto ls = Airlock({"ls", "-q"});
  EXPECT_EQ(ls.out, "dock\n");
}

TEST_F(DockerE2ETest, RmLeavesNoDockerDiskAndTheHostsDockerUntouched) {
  ASSERT_EQ(Airlock({"rm", "-f", "dock"}).exit_code, 0);
  struct stat st;
  EXPECT_NE(stat((dir_->path() + "/state/sandboxes/dock").c_str(), &st), 0);
  EXPECT_EQ(HostDockerState(), host_docker_before_);
}

}  // namespace
}  // namespace airlock
