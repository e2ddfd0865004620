// Egress end to end: a real guest, the real daemons, and real HTTP and
// HTTPS upstreams on the host's loopback (tests/fixtures/upstream.py, with a
// test CA proxyd is told to trust and a --resolve map that points the test
// names at 127.0.0.1). Each test changes the rules of one running sandbox
// and looks at what the guest gets and what the upstream saw.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/proc_probe.h"

namespace airlock {
namespace {

using testing::BinaryPath;

using Upstream = testing::FixtureServer;

Upstream StartUpstream(const std::string& dir, const std::string& name, bool tls) {
  std::vector<std::string> argv = {"python3", BinaryPath("tests/fixtures/upstream.py")};
  if (tls) argv.insert(argv.end(), {"--tls", dir + "/up.pem", dir + "/up.key"});
  return testing::StartFixtureServer(dir, name, argv);
}

class EgressE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(dir_->path()));
    const std::string d = dir_->path();
    // A test CA and an upstream certificate for the test names.
    auto sh = testing::MakeTestCerts(
        d, {"api.example.test", "a.wild.test", "x.y.deep.test", "later.example.test",
            "proxied.example.net"});
    ASSERT_EQ(sh.exit_code, 0) << sh.err;
    https_ = StartUpstream(d, "https", true);
    http_ = StartUpstream(d, "http", false);
    ASSERT_GT(https_.port, 0);
    ASSERT_GT(http_.port, 0);
    // An operator's upstream proxy: everything but the .test names and
    // loopback addresses goes through it.
    proxy_ = testing::StartFixtureServer(
        d, "proxy",
        {"python3", BinaryPath("tests/fixtures/connect_proxy.py"), "--log", d + "/proxy.targets",
         "--map", "proxied.example.net=127.0.0.1", "--deny", "refused.example.net"});
    ASSERT_GT(proxy_.port, 0);
    std::string names;
    for (const char* n :
         {"api.example.test", "plain.example.test", "a.wild.test", "b.c.wild.test", "x.y.deep.test",
          "denied.example.test", "later.example.test", "wrongname.example.test",
          "proxied.example.net", "refused.example.net"}) {
      absl::StrAppend(&names, names.empty() ? "" : ",", n, "=127.0.0.1");
    }
    MakeDirs(d + "/state", 0700).IgnoreError();
    std::ofstream(d + "/state/proxyd.conf")
        << "resolve = " << names << "\nupstream-ca = " << d << "/ca.pem\n"
        << "upstream-proxy = 127.0.0.1:" << proxy_.port
        << "\nno-proxy = **.test, 127.0.0.0/8, ::1\n";
    ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
    auto c = Airlock({"create", "--name", "net", "-m", "1g", "shell"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    auto ca = Airlock({"exec", "-i", "net", "--", "sh", "-c", "cat > /tmp/testca.pem"},
                      ReadFileToString(d + "/ca.pem"));
    ASSERT_EQ(ca.exit_code, 0) << ca.err;
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    for (pid_t p : {https_.pid, http_.pid, proxy_.pid}) {
      if (p > 0) kill(p, SIGTERM);
    }
    delete env_;
    delete dir_;
  }
  void TearDown() override {
    // Each test starts from deny-all with no sandbox rules.
    auto ls = Airlock({"policy", "ls", "--sandbox", "net", "--json"});
    auto j = nlohmann::json::parse(ls.out, nullptr, false);
    if (j.is_object()) {
      for (const auto& r : j["rules"]) {
        if (r["origin"] == "user") Airlock({"policy", "rm", "network", "--id", r["id"]});
      }
    }
  }
  static CommandResult Airlock(const std::vector<std::string>& args,
                               const std::string& input = "") {
    return testing::RunAirlock(*env_, args, input);
  }
  // Guest runs a shell snippet as the agent user.
  static CommandResult Guest(const std::string& script) {
    return Airlock({"exec", "net", "--", "bash", "-c", script});
  }
  static void Allow(const std::vector<std::string>& args) {
    std::vector<std::string> a = {"policy", "allow", "network", "--sandbox", "net"};
    a.insert(a.end(), args.begin(), args.end());
    auto r = Airlock(a);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void Deny(const std::vector<std::string>& args) {
    std::vector<std::string> a = {"policy", "deny", "network", "--sandbox", "net"};
    a.insert(a.end(), args.begin(), args.end());
    auto r = Airlock(a);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string Https(const std::string& host) {
    return absl::StrCat("https://", host, ":", https_.port);
  }
  static std::string Http(const std::string& host) {
    return absl::StrCat("http://", host, ":", http_.port);
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
  static Upstream https_, http_, proxy_;
};

testing::ShortTempDir* EgressE2ETest::dir_;
std::map<std::string, std::string>* EgressE2ETest::env_;
Upstream EgressE2ETest::https_, EgressE2ETest::http_, EgressE2ETest::proxy_;

// curl prints the body, then the status on a line of its own.
const std::string kCurl = "curl -sS -m 20 -w '\\nstatus=%{http_code}\\n' ";

TEST_F(EgressE2ETest, GuestSeesProxyEnvironmentAndTrustsTheCa) {
  auto r = Guest(
      "env | sort; grep -c 'BEGIN CERTIFICATE' "
      "/usr/local/share/ca-certificates/airlock-egress-ca.crt");
  EXPECT_NE(r.out.find("HTTPS_PROXY=http://127.0.0.1:3128"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"), std::string::npos);
  EXPECT_NE(r.out.find("NODE_EXTRA_CA_CERTS="), std::string::npos);
  EXPECT_NE(r.out.find("REQUESTS_CA_BUNDLE="), std::string::npos);
  EXPECT_NE(r.out.find("GIT_SSL_CAINFO="), std::string::npos);
  EXPECT_NE(r.out.find("\n1\n"), std::string::npos) << "the Airlock CA is installed";
}

TEST_F(EgressE2ETest, ExactDomainAllowsForwardAndTransparentAndOthersGet403) {
  Allow({absl::StrCat("plain.example.test:", http_.port)});
  auto fwd = Guest(kCurl + Http("plain.example.test") + "/fwd");
  EXPECT_NE(fwd.out.find("upstream saw GET /fwd"), std::string::npos) << fwd.out << fwd.err;
  auto tr = Guest(std::string(kCurl) + "--noproxy '*' " + Http("plain.example.test") + "/tr");
  EXPECT_NE(tr.out.find("upstream saw GET /tr"), std::string::npos) << tr.out << tr.err;
  // Denied: the same 403 naming the host and the rule, forward or not.
  for (const std::string flags : {"", "--noproxy '*' "}) {
    auto d = Guest(kCurl + flags + Http("denied.example.test") + "/x");
    EXPECT_NE(d.out.find("status=403"), std::string::npos) << flags << d.out << d.err;
    EXPECT_NE(d.out.find(absl::StrCat("blocked denied.example.test:", http_.port)),
              std::string::npos)
        << d.out;
    EXPECT_NE(d.out.find("default deny"), std::string::npos) << d.out;
  }
  // HTTPS to a denied host through the forward proxy: the CONNECT gets 403.
  auto dc = Guest(kCurl + Https("denied.example.test") + "/ 2>&1");
  EXPECT_NE(dc.out.find("403"), std::string::npos) << dc.out;
}

TEST_F(EgressE2ETest, OpaqueTunnelForAHostAllowedOutright) {
  Allow({absl::StrCat("api.example.test:", https_.port)});
  // No HTTP rules: not intercepted, so the guest sees the upstream's own
  // certificate (signed by the test CA, not Airlock's).
  auto r = Guest(std::string(kCurl) + "--cacert /tmp/testca.pem " + Https("api.example.test") +
                 "/tunnel");
  EXPECT_NE(r.out.find("upstream saw GET /tunnel"), std::string::npos) << r.out << r.err;
  auto t = Guest(std::string(kCurl) + "--noproxy '*' --cacert /tmp/testca.pem " +
                 Https("api.example.test") + "/transparent-tunnel");
  EXPECT_NE(t.out.find("upstream saw GET /transparent-tunnel"), std::string::npos)
      << t.out << t.err;
}

TEST_F(EgressE2ETest, WildcardsOneLabelAndAnyDepth) {
  Allow({"*.wild.test", "**.deep.test"});
  // Allowed outright, so tunnelled: the guest checks the upstream's own
  // certificate.
  std::string curl = kCurl + "--cacert /tmp/testca.pem ";
  auto one = Guest(curl + Https("a.wild.test") + "/one");
  EXPECT_NE(one.out.find("upstream saw GET /one"), std::string::npos) << one.out << one.err;
  auto deep = Guest(curl + Https("x.y.deep.test") + "/deep");
  EXPECT_NE(deep.out.find("upstream saw GET /deep"), std::string::npos) << deep.out << deep.err;
  // "*." is one label only.
  auto two = Guest(kCurl + Http("b.c.wild.test") + "/two");
  EXPECT_NE(two.out.find("status=403"), std::string::npos) << two.out;
}

TEST_F(EgressE2ETest, MethodAndPathRulesOnInterceptedHttps) {
  std::string host = absl::StrCat("api.example.test:", https_.port);
  Allow({host, "--method", "GET", "--path", "/repos/**"});
  // Intercepted: the guest trusts Airlock's CA (system bundle), proxyd
  // verifies the upstream against the test CA.
  auto get = Guest(kCurl + "-D - " + Https("api.example.test") + "/repos/a/b");
  EXPECT_NE(get.out.find("upstream saw GET /repos/a/b"), std::string::npos) << get.out << get.err;
  // A second guest connection's request, decided on its own, goes over
  // the TLS connection to the upstream that proxyd kept from the first
  // (the upstream saw the same client port).
  auto again = Guest(kCurl + "-D - " + Https("api.example.test") + "/repos/c");
  EXPECT_NE(again.out.find("upstream saw GET /repos/c"), std::string::npos) << again.out;
  auto peer = [](const std::string& out) {
    size_t at = out.find("X-Upstream-Peer: ");
    return at == std::string::npos ? std::string("none")
                                   : out.substr(at + 17, out.find('\r', at) - at - 17);
  };
  EXPECT_NE(peer(get.out), "none") << get.out;
  EXPECT_EQ(peer(get.out), peer(again.out)) << get.out << again.out;
  auto post = Guest(kCurl + "-X POST -d x=1 " + Https("api.example.test") + "/repos/a/b");
  EXPECT_NE(post.out.find("status=403"), std::string::npos) << post.out << post.err;
  auto other = Guest(kCurl + Https("api.example.test") + "/admin");
  EXPECT_NE(other.out.find("status=403"), std::string::npos) << other.out;
  auto traversal = Guest(kCurl + "--path-as-is " + Https("api.example.test") + "/repos/../admin");
  EXPECT_EQ(traversal.out.find("upstream saw"), std::string::npos) << traversal.out;
  // The Host header must name the host the connection was decided for.
  auto fronted =
      Guest(kCurl + "-H 'Host: denied.example.test' " + Https("api.example.test") + "/repos/a/b");
  EXPECT_NE(fronted.out.find("status=400"), std::string::npos) << fronted.out << fronted.err;
  EXPECT_EQ(fronted.out.find("upstream saw"), std::string::npos) << fronted.out;
  // A host granted only for HTTP refuses other traffic on it.
  auto raw = Guest(absl::StrCat("exec 3<>/dev/tcp/api.example.test/", https_.port,
                                " && printf 'SSH-2.0-x\\r\\n' >&3 && cat <&3"));
  EXPECT_NE(raw.err.find("reset"), std::string::npos) << raw.out << raw.err;
}

// Package managers' URLs pass as sent: Debian's "~" arrives as %7e (apt),
// npm's scoped names carry %2f. Where a path glob applies to the host,
// the shapes a server could read as another path are refused instead.
TEST_F(EgressE2ETest, PackageManagerPathsPassAndBypassShapesAreRefusedWherePathRulesApply) {
  std::string host = absl::StrCat("api.example.test:", https_.port);
  Allow({host, "--method", "GET"});
  std::string curl = kCurl + "--path-as-is " + Https("api.example.test");
  for (const char* path : {"/debian/pool/main/n/npm/npm_9.2.0%7eds1-1_all.deb",
                           "/@anthropic-ai%2fclaude-code", "/@scope%2Fpkg/-/pkg-1.0.0.tgz",
                           "/double//slash"}) {
    auto r = Guest(curl + path);
    EXPECT_NE(r.out.find(absl::StrCat("upstream saw GET ", path)), std::string::npos)
        << path << ": " << r.out << r.err;
  }
  // Always refused, path rules or not.
  for (const char* path : {"/repos/%2e%2e/admin", "/repos/..;/admin", "/a%00b"}) {
    auto r = Guest(curl + path);
    EXPECT_NE(r.out.find("status=400"), std::string::npos) << path << ": " << r.out;
    EXPECT_EQ(r.out.find("upstream saw"), std::string::npos) << path << ": " << r.out;
  }
  // Now a path rule applies to the host.
  Deny({host, "--method", "DELETE", "--path", "/repos/**"});
  bool refused = false;
  for (int i = 0; i < 50 && !refused; ++i) {
    refused = Guest(curl + "/repos%2f..%2fadmin").out.find("status=400") != std::string::npos;
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(refused);
  for (const char* path : {"/repos%2f..%2fadmin", "/repos%2F..", "/repos%5c..", "//repos/x",
                           "/repos//x"}) {
    auto r = Guest(curl + path);
    EXPECT_NE(r.out.find("status=400"), std::string::npos) << path << ": " << r.out;
    EXPECT_NE(r.out.find("refused because path rules apply to api.example.test"),
              std::string::npos)
        << path << ": " << r.out;
    EXPECT_EQ(r.out.find("upstream saw"), std::string::npos) << path << ": " << r.out;
  }
  // An encoded unreserved character is matched decoded: "/rep%6fs/x" is
  // the path "/repos/x" to the glob (denied for DELETE), and sent as is.
  auto enc = Guest(kCurl + "--path-as-is -X DELETE " + Https("api.example.test") + "/rep%6fs/x");
  EXPECT_NE(enc.out.find("status=403"), std::string::npos) << enc.out;
  EXPECT_NE(enc.out.find("DELETE /repos/**"), std::string::npos) << enc.out;
  auto ok = Guest(curl + "/rep%6fs/x");
  EXPECT_NE(ok.out.find("upstream saw GET /rep%6fs/x"), std::string::npos) << ok.out;
}

// The operator's upstream proxy carries an allowed connection (CONNECT),
// its refusal reaches the guest as a 502 naming it, and no-proxy names
// never go through it.
TEST_F(EgressE2ETest, AnUpstreamProxyCarriesWhatNoProxyDoesNotList) {
  Allow({absl::StrCat("proxied.example.net:", https_.port)});
  auto r = Guest(kCurl + "--cacert /tmp/testca.pem " + Https("proxied.example.net") + "/via-proxy");
  EXPECT_NE(r.out.find("upstream saw GET /via-proxy"), std::string::npos) << r.out << r.err;
  std::string targets = ReadFileToString(dir_->path() + "/proxy.targets");
  EXPECT_NE(targets.find(absl::StrCat("proxied.example.net:", https_.port)), std::string::npos)
      << targets;
  Allow({absl::StrCat("refused.example.net:", https_.port)});
  auto refused = Guest(kCurl + Https("refused.example.net") + "/x 2>&1");
  EXPECT_NE(refused.out.find("502"), std::string::npos) << refused.out;
  EXPECT_EQ(refused.out.find("upstream saw"), std::string::npos) << refused.out;
  // Every other test's traffic went directly.
  EXPECT_EQ(ReadFileToString(dir_->path() + "/proxy.targets").find(".test:"), std::string::npos);
}

TEST_F(EgressE2ETest, UpstreamCertificateIsVerified) {
  // Intercepted, and the upstream's certificate does not name this host:
  // proxyd refuses it as any client would, and says why.
  Allow({"wrongname.example.test", "--method", "GET"});
  auto r = Guest(kCurl + Https("wrongname.example.test") + "/x");
  EXPECT_NE(r.out.find("status=502"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("certificate"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("upstream saw"), std::string::npos) << r.out;
}

TEST_F(EgressE2ETest, DenyBeatsAllow) {
  std::string host = absl::StrCat("api.example.test:", https_.port);
  Allow({host});
  Deny({"api.example.test", "--method", "DELETE", "--path", "/repos/**"});
  auto post = Guest(kCurl + "-X POST " + Https("api.example.test") + "/repos/x");
  EXPECT_NE(post.out.find("upstream saw POST /repos/x"), std::string::npos) << post.out << post.err;
  auto del = Guest(kCurl + "-X DELETE " + Https("api.example.test") + "/repos/x");
  EXPECT_NE(del.out.find("status=403"), std::string::npos) << del.out;
  EXPECT_NE(del.out.find("deny api.example.test DELETE /repos/**"), std::string::npos) << del.out;
}

TEST_F(EgressE2ETest, AddressRulesOpenHostLoopbackOnlyWhenNamed) {
  // Through the forward proxy a guest can name the host's loopback.
  std::string via = "-x http://127.0.0.1:3128 --noproxy '' ";
  auto before = Guest(kCurl + via + Http("127.0.0.1") + "/lo");
  EXPECT_NE(before.out.find("status=403"), std::string::npos) << before.out;
  // Even "allow everything" does not open a protected address by name.
  ASSERT_EQ(Airlock({"policy", "init", "allow-all"}).exit_code, 0);
  auto all = Guest(kCurl + via + Http("localhost") + "/lo");
  EXPECT_EQ(all.out.find("upstream saw"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("protected address"), std::string::npos) << all.out;
  ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
  Allow({"127.0.0.0/8"});
  auto cidr = Guest(kCurl + via + Http("127.0.0.1") + "/cidr");
  EXPECT_NE(cidr.out.find("upstream saw GET /cidr"), std::string::npos) << cidr.out << cidr.err;
}

TEST_F(EgressE2ETest, RuleChangesReachARunningSandboxWithinASecond) {
  std::string url = Http("later.example.test") + "/later";
  EXPECT_NE(Guest(kCurl + url).out.find("status=403"), std::string::npos);
  Allow({"later.example.test"});
  // Poll from inside the guest: allowed well within the second the issue
  // asks for (10 tries 100 ms apart, then give up).
  auto r = Guest("for i in $(seq 10); do curl -s -m 5 " + url +
                 " | grep -q 'upstream saw' && { echo allowed-after-$i; exit 0; }; sleep 0.1; "
                 "done; echo never");
  EXPECT_NE(r.out.find("allowed-after-"), std::string::npos) << r.out;
  Airlock({"policy", "rm", "network", "--resource", "later.example.test", "--sandbox", "net"});
  auto again = Guest(kCurl + url);
  EXPECT_NE(again.out.find("status=403"), std::string::npos) << again.out;
}

TEST_F(EgressE2ETest, DeniedNameResolvesAndFailsTheSameWay) {
  auto dns = Guest("getent hosts denied.example.test");
  EXPECT_EQ(dns.exit_code, 0);
  EXPECT_NE(dns.out.find("198.18."), std::string::npos) << dns.out;
  auto r = Guest(std::string(kCurl) + "--noproxy '*' " + Https("denied.example.test") + "/x");
  EXPECT_NE(r.out.find("status=403"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("blocked denied.example.test"), std::string::npos) << r.out;
  // An address spelled as a name is not resolved (it would be decided as a
  // name and connected to as an address).
  EXPECT_NE(Guest("getent hosts 0x5d.0xb8.0xd8.0x22").exit_code, 0);
  // No AAAA, no other record types, no UDP anywhere else.
  auto udp = Guest("exec 3<>/dev/udp/1.1.1.1/53 && echo x >&3");
  EXPECT_NE(udp.exit_code, 0);
  EXPECT_NE(udp.err.find("Operation not permitted"), std::string::npos) << udp.err;
}

TEST_F(EgressE2ETest, ServerSentEventsArriveAsTheyAreSent) {
  Allow({"api.example.test", "--method", "GET", "--path", "/sse"});
  // Each line is stamped when the guest reads it; the upstream sends five
  // events 300 ms apart, so a buffering proxy would stamp them together.
  auto r = Guest(std::string("curl -sN -m 20 ") + Https("api.example.test") +
                 "/sse | while read -r l; do [ -n \"$l\" ] && date +%s.%N; done");
  std::vector<std::string> stamps = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(stamps.size(), 5u) << r.out << r.err;
  double spread = std::stod(stamps.back()) - std::stod(stamps.front());
  EXPECT_GT(spread, 0.8) << "events arrived together: " << r.out;
}

TEST_F(EgressE2ETest, ProxydKilledAndRestartedReattachesTheSandbox) {
  Allow({absl::StrCat("plain.example.test:", http_.port)});
  Guest(kCurl + Http("plain.example.test") + "/before-the-kill");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the log writes in batches
  auto pids = testing::ProcessesNamed(dir_->path() + "/run");
  pid_t proxyd = 0;
  for (pid_t p : pids) {
    if (ProcessCmdline(p).find("proxyd") != std::string::npos) proxyd = p;
  }
  ASSERT_GT(proxyd, 0);
  kill(proxyd, SIGKILL);
  ASSERT_TRUE(AwaitExit(proxyd, std::chrono::seconds(5))) << "proxyd outlived SIGKILL";
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  // proxyd finds the attachment in its state and takes the port back.
  auto r = Guest("for i in $(seq 50); do curl -s -m 5 " + Http("plain.example.test") +
                 "/back | grep -q 'upstream saw' && { echo back; exit 0; }; sleep 0.2; done");
  EXPECT_NE(r.out.find("back"), std::string::npos) << r.out << r.err;
  // The decisions from before the kill are still in the log.
  auto log = Airlock({"policy", "log", "--json", "--sandbox", "net", "--limit", "100000"});
  EXPECT_NE(log.out.find("/before-the-kill"), std::string::npos);
}

TEST_F(EgressE2ETest, AKeptAliveConnectionHasEachRequestDecidedOnItsOwn) {
  Allow({absl::StrCat("plain.example.test:", http_.port), "--method", "GET", "--path",
         "/ok/**"});
  const std::string base = Http("plain.example.test");
  // Forward and transparent: curl sends the second request on the first's
  // connection; it is decided by itself (denied, never seen upstream), and
  // the third, on a new connection after the 403's close, is allowed.
  for (const std::string flags : {"", "--noproxy '*' "}) {
    auto r = Guest("curl -sS -v -m 20 " + flags + base + "/ok/1 " + base + "/no/2 " + base +
                   "/ok/3 2>&1");
    EXPECT_NE(r.out.find("upstream saw GET /ok/1"), std::string::npos) << flags << r.out;
    EXPECT_NE(r.out.find("Re-using existing connection"), std::string::npos) << flags << r.out;
    EXPECT_NE(r.out.find("< HTTP/1.1 403"), std::string::npos) << flags << r.out;
    EXPECT_EQ(r.out.find("upstream saw GET /no/2"), std::string::npos) << flags << r.out;
    EXPECT_NE(r.out.find("upstream saw GET /ok/3"), std::string::npos) << flags << r.out;
  }
}

TEST_F(EgressE2ETest, FiveHundredConnectionsFromEachOfTwoSandboxesHoldTheCapsAndLeaveNothing) {
  Allow({absl::StrCat("plain.example.test:", http_.port)});
  auto c = Airlock({"create", "--name", "net2", "-m", "1g", "shell"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  ASSERT_EQ(Airlock({"policy", "allow", "network", "--sandbox", "net2",
                     absl::StrCat("plain.example.test:", http_.port)})
                .exit_code,
            0);
  const std::string run_dir = dir_->path() + "/run";
  pid_t proxyd = testing::DaemonPid(run_dir, "proxyd");
  ASSERT_GT(proxyd, 0);
  // Warm: each sandbox's tunnel and a first request.
  for (const char* sb : {"net", "net2"}) {
    auto w = Airlock({"exec", sb, "--", "bash", "-c", kCurl + Http("plain.example.test") + "/warm"});
    ASSERT_NE(w.out.find("status=200"), std::string::npos) << sb << w.out << w.err;
  }
  testing::ProcUsage before = testing::SampleUsage(proxyd);
  // Each guest opens 500 connections to the forward proxy at once and
  // holds them, silent, for 20 s.
  const std::string hold =
      "n=0; for i in $(seq 500); do exec {fd}<>/dev/tcp/127.0.0.1/3128 && n=$((n+1)); done; "
      "echo opened=$n; sleep 20";
  CommandResult held[2];
  std::thread a([&] { held[0] = Airlock({"exec", "net", "--", "bash", "-c", hold}); });
  std::thread b([&] { held[1] = Airlock({"exec", "net2", "--", "bash", "-c", hold}); });
  int peak_threads = before.threads, peak_fds = before.fds;
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    testing::ProcUsage u = testing::SampleUsage(proxyd);
    peak_threads = std::max(peak_threads, u.threads);
    peak_fds = std::max(peak_fds, u.fds);
  }
  // While both are at their caps, a new request of the first sandbox is
  // reset (over its cap)... and the host still answers the guests' DNS.
  auto over = Guest("curl -sS -m 10 -o /dev/null -w '%{http_code}' " +
                    Http("plain.example.test") + "/over-the-cap 2>&1; echo; getent hosts x.test");
  a.join();
  b.join();
  // Every connection within the cap opens; one over it may be reset by
  // the cap before bash's connect even returns.
  for (const auto& h : held) {
    size_t at = h.out.find("opened=");
    ASSERT_NE(at, std::string::npos) << h.out << h.err;
    EXPECT_GE(std::atoi(h.out.c_str() + at + 7), 256) << h.out << h.err;
  }
  EXPECT_EQ(over.out.find("200"), std::string::npos) << over.out;
  EXPECT_NE(over.out.find("198.18."), std::string::npos) << over.out;
  // A guest connection holds no descriptor in proxyd (its bytes pass the
  // mux and its handler in memory) and no thread (handlers are fibers).
  EXPECT_LE(peak_fds, before.fds + 32) << "peak " << peak_fds;
  EXPECT_LE(peak_threads, before.threads + 8) << "peak " << peak_threads;
  // Everything is given back once the guests close their ends.
  testing::ProcUsage after;
  for (int i = 0; i < 100; ++i) {
    after = testing::SampleUsage(proxyd);
    if (after.threads <= before.threads + 2 && after.fds <= before.fds + 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_LE(after.threads, before.threads + 2) << "before " << before.threads;
  EXPECT_LE(after.fds, before.fds + 2) << "before " << before.fds;
  // And both sandboxes work as before.
  for (const char* sb : {"net", "net2"}) {
    auto w = Airlock({"exec", sb, "--", "bash", "-c", kCurl + Http("plain.example.test") + "/after"});
    EXPECT_NE(w.out.find("status=200"), std::string::npos) << sb << w.out << w.err;
  }
  // Both sandboxes reached their 256 (the load was real) and neither
  // passed it: proxyd says so when it resets the first over the cap.
  auto log = ReadFileToString(dir_->path() + "/state/logs/proxyd.log");
  for (const char* sb : {"net", "net2"}) {
    bool at_cap = false;
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      at_cap = at_cap || (absl::StrContains(line, "connection cap reached") &&
                          absl::StrContains(line, absl::StrCat("\"sandbox\":\"", sb, "\"")) &&
                          absl::StrContains(line, "\"sandbox_open\":\"256\""));
    }
    EXPECT_TRUE(at_cap) << sb << ": no cap warning at 256 in\n" << log;
  }
  Airlock({"rm", "-f", "net2"});
}

TEST_F(EgressE2ETest, ProxydStoppedMidTransferEndsCleanly) {
  Allow({absl::StrCat("plain.example.test:", http_.port)});
  const std::string run_dir = dir_->path() + "/run";
  pid_t proxyd = testing::DaemonPid(run_dir, "proxyd");
  ASSERT_GT(proxyd, 0);
  // A slow download (server-sent events over 1.5 s) in flight when proxyd
  // is told to stop: it exits on its own (no crash, no hang), the guest's
  // transfer ends with an error, not a hang, and a restarted proxyd carries
  // the next request.
  std::thread transfer([&] {
    Guest("curl -sS -m 30 " + Http("plain.example.test") + "/sse >/dev/null 2>&1; echo done");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_EQ(kill(proxyd, SIGTERM), 0);
  bool stopped = AwaitExit(proxyd, std::chrono::seconds(20));
  transfer.join();
  EXPECT_TRUE(stopped) << "proxyd did not stop within 20 s";
  auto log = ReadFileToString(dir_->path() + "/state/logs/proxyd.log");
  EXPECT_EQ(log.find("\"level\":\"fatal\""), std::string::npos);
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  auto r = Guest("for i in $(seq 50); do curl -s -m 5 " + Http("plain.example.test") +
                 "/again | grep -q 'upstream saw' && { echo back; exit 0; }; sleep 0.2; done");
  EXPECT_NE(r.out.find("back"), std::string::npos) << r.out << r.err;
}

TEST_F(EgressE2ETest, DecisionLogRecordsEveryPath) {
  Guest(kCurl + Http("denied.example.test") + "/logged");
  auto log = Airlock({"policy", "log", "--json", "--sandbox", "net", "--limit", "1000"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  bool forward_deny = false, dns = false, transparent = false;
  for (absl::string_view line : absl::StrSplit(log.out, '\n', absl::SkipEmpty())) {
    auto j = nlohmann::json::parse(line);
    if (j["via"] == "forward" && j["verdict"] == "deny" && j["path"] == "/logged" &&
        j["method"] == "GET" && j["host"] == "denied.example.test" && j["rule"] == "default deny") {
      forward_deny = true;
    }
    if (j["via"] == "dns") dns = true;
    if (j["via"] == "transparent") transparent = true;
  }
  EXPECT_TRUE(forward_deny) << log.out;
  EXPECT_TRUE(dns);
  EXPECT_TRUE(transparent);
  auto text = Airlock({"policy", "log", "--limit", "3"});
  EXPECT_NE(text.out.find("TIME"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace airlock
