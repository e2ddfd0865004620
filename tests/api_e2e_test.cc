// The REST API end to end: real daemons (apid among them) and real QEMU
// guests, driven over real HTTP and WebSocket by a client written from the
// published API description (tests/sandboxes_api_client.h). Token exchange,
// create and poll to running, endpoint credentials, files and exec,
// processes and the interact session, every error status the API names,
// idempotency and ETags, a timeout that deletes, two clients at once, and
// that sandboxes made here are ordinary Airlock sandboxes.
#include <string.h>
#include <sys/stat.h>

#include <fstream>
#include <future>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/sandboxes_api_client.h"

namespace airlock {
namespace {

using nlohmann::json;
using sbxapi::B64;
using sbxapi::Client;
using sbxapi::Endpoint;
using sbxapi::UnB64;

constexpr int kExecLimit = 65536;

class ApiE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(dir_->path()));
    ASSERT_TRUE(MakeDirs(dir_->path() + "/state", 0700).ok());
    std::ofstream(dir_->path() + "/state/apid.conf") << "exec-output-limit = " << kExecLimit << "\n";
    ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
    auto urls = Airlock({"api", "url", "--json"});
    ASSERT_EQ(urls.exit_code, 0) << urls.err;
    auto u = json::parse(urls.out);
    base_ = new std::string(u["management"]);
    token_url_ = new std::string(u["token_exchange"]);
    auto made = Airlock({"api", "token", "create", "ci"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    secret_ = new std::string(absl::StripAsciiWhitespace(made.out));
    // One sandbox most cases share.
    Client c = NewClient();
    auto created = c.CreateSandbox(
        {{"displayName", "shared"}, {"resources", {{"cpus", 1}, {"memoryMib", 2048}}}});
    ASSERT_EQ(created.status, 202) << created.body;
    shared_ = new std::string(created.Json()["uid"]);
    auto running = c.WaitForStatus(*shared_, {"running", "failed"}, std::chrono::seconds(300));
    ASSERT_EQ(running["core"]["status"], "running") << running.dump();
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    delete env_;
    delete dir_;
  }
  static CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(*env_, args, "", 600);
  }
  static Client NewClient() {
    Client c(*base_, *token_url_);
    auto r = c.Login("ci", *secret_);
    EXPECT_EQ(r.status, 200) << r.body;
    return c;
  }
  static Endpoint EndpointFor(Client& c, const std::string& uid,
                              const std::vector<std::string>& perms) {
    auto sb = c.GetSandbox(uid).Json();
    auto cred = c.EndpointCredential(uid, perms);
    EXPECT_EQ(cred.status, 200) << cred.body;
    return Endpoint(sb["core"]["endpoint"]["uri"], cred.Json()["token"]);
  }
  static Endpoint SharedEndpoint(Client& c) {
    return EndpointFor(c, *shared_,
                       {"sandboxesExec", "sandboxesFilesRead", "sandboxesFilesWrite"});
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
  static std::string* base_;
  static std::string* token_url_;
  static std::string* secret_;
  static std::string* shared_;
};

testing::ShortTempDir* ApiE2ETest::dir_;
std::map<std::string, std::string>* ApiE2ETest::env_;
std::string* ApiE2ETest::base_;
std::string* ApiE2ETest::token_url_;
std::string* ApiE2ETest::secret_;
std::string* ApiE2ETest::shared_;

TEST_F(ApiE2ETest, CreatePollWriteExecReadDelete) {
  Client c = NewClient();
  auto created = c.CreateSandbox({{"displayName", "flow"},
                                  {"resources", {{"cpus", 1}, {"memoryMib", "2048"}}},
                                  {"environment", {{"GREETING", "hello"}}},
                                  {"labels", {{"team", "ci"}}}});
  ASSERT_EQ(created.status, 202) << created.body;
  json sb = created.Json();
  std::string uid = sb["uid"];
  EXPECT_EQ(sb["name"], "sandboxes/" + uid);
  EXPECT_EQ(sb["core"]["status"], "creating");
  EXPECT_EQ(created.headers["etag"], sb["core"]["etag"]);
  EXPECT_EQ(sb["core"]["resources"]["memoryMib"], "2048");
  json running = c.WaitForStatus(uid, {"running", "failed"}, std::chrono::seconds(300));
  ASSERT_EQ(running["core"]["status"], "running") << running.dump();

  // An ordinary Airlock sandbox: the CLI sees and drives it.
  auto ls = Airlock({"ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0);
  EXPECT_NE(ls.out.find(uid), std::string::npos) << ls.out;
  EXPECT_EQ(Airlock({"exec", uid, "--", "true"}).exit_code, 0);

  auto cred = c.EndpointCredential(uid, {"sandboxesExec", "sandboxesFilesRead",
                                         "sandboxesFilesWrite"}, "900s");
  ASSERT_EQ(cred.status, 200);
  EXPECT_EQ(cred.headers["cache-control"], "no-store");
  json cj = cred.Json();
  EXPECT_EQ(cj["sandbox"], "sandboxes/" + uid);
  EXPECT_EQ(cj["audience"], running["core"]["endpoint"]["uri"]);
  EXPECT_EQ(cj["permissions"].size(), 3u);
  // The TTL is clamped to five minutes.
  std::tm tm{};
  strptime(cj["expireTime"].get<std::string>().c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  EXPECT_LE(timegm(&tm) - time(nullptr), 301);
  Endpoint ep(running["core"]["endpoint"]["uri"], cj["token"]);

  const std::string script = "#!/bin/sh\necho \"$GREETING from $(hostname) $1\"\necho oops >&2\nexit 7\n";
  auto w = ep.WriteFile("/tmp/hello.sh", script, 0755);
  ASSERT_EQ(w.status, 200) << w.body;
  EXPECT_EQ(w.Json()["info"]["mode"], 0755);
  EXPECT_EQ(w.Json()["info"]["size"], std::to_string(script.size()));
  auto x = ep.Exec({{"cmd", {"/tmp/hello.sh", "arg"}}});
  ASSERT_EQ(x.status, 200) << x.body;
  json xj = x.Json();
  EXPECT_EQ(xj["exitCode"], 7);
  EXPECT_EQ(UnB64(xj["stdout"]), "hello from " + uid + " arg\n");
  EXPECT_EQ(UnB64(xj["stderr"]), "oops\n");
  EXPECT_EQ(xj["incomplete"], false);
  auto env_exec = ep.Exec({{"cmd", {"sh", "-c", "echo $A; pwd; id -un"}},
                           {"env", {{"A", "from-env"}}},
                           {"workingDir", "/tmp"},
                           {"user", "root"}});
  EXPECT_EQ(UnB64(env_exec.Json()["stdout"]), "from-env\n/tmp\nroot\n");
  auto back = ep.ReadFile("/tmp/hello.sh");
  EXPECT_EQ(back.status, 200);
  EXPECT_EQ(back.body, script);
  EXPECT_EQ(back.headers["content-length"], std::to_string(script.size()));
  EXPECT_EQ(back.headers["content-type"], "application/octet-stream");

  auto mk = ep.Call("PUT", "/v1/files/directories",
                    json{{"path", "/tmp/a/b"}, {"parents", true}}.dump());
  EXPECT_EQ(mk.status, 200) << mk.body;
  auto again = ep.Call("PUT", "/v1/files/directories", json{{"path", "/tmp/a/b"}}.dump());
  EXPECT_EQ(again.status, 200) << "a repeated mkdir converges: " << again.body;
  auto mv = ep.Call("POST", "/v1/files/move",
                    json{{"from", "/tmp/hello.sh"}, {"to", "/tmp/a/b/moved.sh"}}.dump());
  EXPECT_EQ(mv.status, 200) << mv.body;
  auto st = ep.Call("GET", "/v1/files/stat?path=/tmp/a/b/moved.sh");
  EXPECT_EQ(st.Json()["info"]["type"], "regular");
  auto list = ep.Call("GET", "/v1/files?path=/tmp/a/b");
  ASSERT_EQ(list.Json()["entries"].size(), 1u) << list.body;
  EXPECT_EQ(list.Json()["entries"][0]["path"], "/tmp/a/b/moved.sh");
  EXPECT_EQ(ep.Call("GET", "/v1/files/stat?path=/tmp/hello.sh").status, 404);
  auto nonempty = ep.Call("DELETE", "/v1/files?path=/tmp/a");
  EXPECT_EQ(nonempty.status, 409);
  EXPECT_EQ(nonempty.Code(), "failedPrecondition") << nonempty.body;
  auto rm = ep.Call("DELETE", "/v1/files?path=/tmp/a&recursive=true");
  EXPECT_EQ(rm.status, 200) << rm.body;
  EXPECT_EQ(ep.Call("DELETE", "/v1/files?path=/tmp/a").status, 200) << "absent is fine";

  // Stop and start keep the disk.
  ASSERT_EQ(ep.WriteFile("/root/kept", "kept").status, 200);
  auto stop = c.StopSandbox(uid);
  EXPECT_TRUE(stop.status == 200 || stop.status == 202) << stop.body;
  EXPECT_EQ(c.WaitForStatus(uid, {"stopped"}, std::chrono::seconds(120))["core"]["status"],
            "stopped");
  auto start = c.StartSandbox(uid);
  EXPECT_TRUE(start.status == 200 || start.status == 202) << start.body;
  ASSERT_EQ(c.WaitForStatus(uid, {"running", "failed"}, std::chrono::seconds(300))["core"]["status"],
            "running");
  EXPECT_EQ(ep.ReadFile("/root/kept").body, "kept");

  auto del = c.DeleteSandbox(uid);
  ASSERT_EQ(del.status, 202) << del.body;
  EXPECT_EQ(del.Json()["core"]["status"], "deleting");
  EXPECT_TRUE(c.WaitForStatus(uid, {"__never__"}, std::chrono::seconds(120)).is_null())
      << "the sandbox is gone";
  EXPECT_EQ(c.GetSandbox(uid).status, 404);
  EXPECT_EQ(c.GetSandbox(uid).Code(), "notFound");
  EXPECT_EQ(c.Management("DELETE", "/v1/sandboxes/" + uid, "", {"If-Match: \"x\""}).status, 204);
  EXPECT_EQ(Airlock({"ls", "--json"}).out.find(uid), std::string::npos);
}

TEST_F(ApiE2ETest, AuthenticationRefusals) {
  Client anon(*base_, *token_url_);
  EXPECT_EQ(anon.Login("ci", "alk_wrong").status, 401);
  EXPECT_EQ(anon.Login("nobody", *secret_).Code(), "unauthenticated");
  auto no_auth = anon.Management("GET", "/v1/sandboxes");
  EXPECT_EQ(no_auth.status, 401);
  EXPECT_EQ(no_auth.Code(), "unauthenticated");
  anon.set_access_token("alk1.forged.token");
  EXPECT_EQ(anon.Management("GET", "/v1/sandboxes").status, 401);

  Client c = NewClient();
  Endpoint ep = EndpointFor(c, *shared_, {"sandboxesFilesRead"});
  // The management token is refused on the data plane.
  Endpoint with_access(ep.uri(), c.access_token());
  EXPECT_EQ(with_access.Exec({{"cmd", {"true"}}}).status, 401);
  // A credential without the permission: 403.
  auto no_perm = ep.Exec({{"cmd", {"true"}}});
  EXPECT_EQ(no_perm.status, 403);
  EXPECT_EQ(no_perm.Code(), "permissionDenied");
  EXPECT_EQ(ep.ReadFile("/etc/hostname").status, 200);
  // Another sandbox's endpoint with this credential: 401.
  std::string other_uri = ep.uri().substr(0, ep.uri().rfind('/') + 1) + "someone-else";
  EXPECT_EQ(Endpoint(other_uri, ep.token()).ReadFile("/etc/hostname").status, 401);
  // An endpoint credential is not a management token.
  Client as_endpoint(*base_, *token_url_);
  as_endpoint.set_access_token(ep.token());
  EXPECT_EQ(as_endpoint.Management("GET", "/v1/sandboxes").status, 401);
  // Bad endpoint-credential requests.
  EXPECT_EQ(c.EndpointCredential(*shared_, {"sandboxesDelete"}).Code(), "invalidArgument");
  EXPECT_EQ(c.EndpointCredential(*shared_, {}).status, 400);
  EXPECT_EQ(c.EndpointCredential("no-such-box", {"sandboxesExec"}).status, 404);
  // Expiry: a one-second credential stops working.
  auto short_cred = c.EndpointCredential(*shared_, {"sandboxesFilesRead"}, "1s");
  ASSERT_EQ(short_cred.status, 200);
  Endpoint brief(ep.uri(), short_cred.Json()["token"]);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  auto expired = brief.ReadFile("/etc/hostname");
  EXPECT_EQ(expired.status, 401);
  EXPECT_NE(expired.body.find("expired"), std::string::npos) << expired.body;
  // Revoking the API token voids what was made from it, at once.
  auto second = Airlock({"api", "token", "create", "temp"});
  ASSERT_EQ(second.exit_code, 0);
  Client t(*base_, *token_url_);
  ASSERT_EQ(t.Login("temp", std::string(absl::StripAsciiWhitespace(second.out))).status, 200);
  Endpoint t_ep = EndpointFor(t, *shared_, {"sandboxesFilesRead"});
  EXPECT_EQ(t.Management("GET", "/v1/sandboxes").status, 200);
  ASSERT_EQ(Airlock({"api", "token", "rm", "temp"}).exit_code, 0);
  EXPECT_EQ(t.Management("GET", "/v1/sandboxes").status, 401);
  EXPECT_EQ(t_ep.ReadFile("/etc/hostname").status, 401);
  auto tokens = Airlock({"api", "token", "ls", "--json"});
  EXPECT_EQ(tokens.out.find("temp"), std::string::npos);
  EXPECT_EQ(tokens.out.find("alk_"), std::string::npos) << "secrets are never listed";
}

TEST_F(ApiE2ETest, BadRequestsChangeNothing) {
  Client c = NewClient();
  auto before = c.Management("GET", "/v1/sandboxes?pageSize=100").Json()["sandboxes"].size();
  auto unknown = c.CreateSandbox({{"displayName", "x"}, {"bogusField", 1}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.Code(), "invalidArgument");
  EXPECT_EQ(c.CreateSandbox({{"resources", {{"cpus", 2}}}}).Code(), "invalidArgument")
      << "both resource fields are required";
  auto odd = c.CreateSandbox({{"resources", {{"cpus", 3}, {"memoryMib", 3000}}}});
  EXPECT_EQ(odd.status, 400);
  EXPECT_NE(odd.body.find("1/2048"), std::string::npos) << odd.body;
  auto image = c.CreateSandbox({{"imageRef", "localhost:1/no/such:image"}});
  EXPECT_EQ(image.status, 400) << image.body;
  EXPECT_EQ(image.Code(), "invalidArgument");
  EXPECT_EQ(c.CreateSandbox({{"agent", "no-such-agent"}}).status, 400);
  EXPECT_EQ(c.CreateSandbox({{"mcp", {{"servers", {"x"}}}}}).status, 501);
  EXPECT_EQ(c.Management("POST", "/v1/sandboxes", "not json").status, 400);
  EXPECT_EQ(c.Management("POST", "/v1/sandboxes", "[]").status, 400);
  EXPECT_EQ(c.Management("GET", "/v1/sandboxes?pageSize=-1").status, 400);
  EXPECT_EQ(c.Management("GET", "/v1/sandboxes?pageToken=bogus").status, 400);
  EXPECT_EQ(c.Management("GET", "/v1/sandboxes?filter=colour=red").status, 400);
  EXPECT_EQ(c.Management("GET", "/v1/sandboxes/no-such-box").status, 404);
  EXPECT_EQ(c.Management("PUT", "/v1/sandboxes").status, 405);
  auto after = c.Management("GET", "/v1/sandboxes?pageSize=100").Json()["sandboxes"].size();
  EXPECT_EQ(after, before) << "no refused create left a sandbox";

  // Not in Airlock yet: 501 naming the operation, after authentication.
  auto snap = c.Management("POST", "/v1/sandboxes/" + *shared_ + "/snapshots",
                           json{{"displayName", "s"}}.dump());
  EXPECT_EQ(snap.status, 501);
  EXPECT_EQ(snap.Code(), "unimplemented");
  EXPECT_NE(snap.body.find("createSnapshot"), std::string::npos);
  EXPECT_EQ(c.Management("GET", "/v1/volumes").status, 501);
  Client anon(*base_, *token_url_);
  EXPECT_EQ(anon.Management("GET", "/v1/volumes").status, 401);

  // Data-plane bad input.
  Endpoint ep = SharedEndpoint(c);
  EXPECT_EQ(ep.Exec({{"cmd", json::array()}}).status, 400);
  EXPECT_EQ(ep.Exec({{"cmd", {"true"}}, {"shell", true}}).status, 400);
  EXPECT_EQ(ep.Call("GET", "/v1/files/content").status, 400);
  EXPECT_EQ(ep.Call("GET", "/v1/files/content?path=relative").status, 400);
  EXPECT_EQ(ep.ReadFile("/no/such/file").status, 404);
}

TEST_F(ApiE2ETest, EtagsAndIdempotency) {
  Client c = NewClient();
  auto got = c.GetSandbox(*shared_);
  std::string etag = got.headers["etag"];
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(c.Management("GET", "/v1/sandboxes/" + *shared_, "", {"If-None-Match: " + etag}).status,
            304);
  std::string path = "/v1/sandboxes/" + *shared_;
  json rename = {{"displayName", "renamed"}};
  auto no_key = c.Management("PATCH", path, rename.dump(), {"If-Match: " + etag});
  EXPECT_EQ(no_key.status, 400) << "updateSandbox needs an Idempotency-Key";
  auto no_match = c.Management("PATCH", path, rename.dump(), {"Idempotency-Key: p1"});
  EXPECT_EQ(no_match.status, 428);
  EXPECT_EQ(no_match.Code(), "failedPrecondition");
  EXPECT_NE(no_match.body.find("etag_required"), std::string::npos);
  auto stale = c.Management("PATCH", path, rename.dump(),
                            {"Idempotency-Key: p1", "If-Match: \"stale\""});
  EXPECT_EQ(stale.status, 412);
  EXPECT_EQ(stale.Json()["details"][0]["currentEtag"], etag) << stale.body;
  auto ok = c.Management("PATCH", path, rename.dump(), {"Idempotency-Key: p1", "If-Match: " + etag});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["displayName"], "renamed");
  EXPECT_NE(ok.headers["etag"], etag) << "a visible change changes the ETag";
  auto replay = c.Management("PATCH", path, rename.dump(), {"Idempotency-Key: p1", "If-Match: " + etag});
  EXPECT_EQ(replay.status, 200) << "the same key and payload replay the first result";
  EXPECT_EQ(replay.body, ok.body);
  auto conflict = c.Management("PATCH", path, json{{"displayName", "other"}}.dump(),
                               {"Idempotency-Key: p1", "If-Match: " + ok.headers["etag"]});
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(conflict.Code(), "failedPrecondition");
  auto bad_name = c.Management("PATCH", path, json{{"displayName", "no spaces"}}.dump(),
                               {"Idempotency-Key: p2", "If-Match: " + ok.headers["etag"]});
  EXPECT_EQ(bad_name.status, 400);
  EXPECT_EQ(Airlock({"ls", "--json"}).out.find("no spaces"), std::string::npos);

  // Create under a key: a retry gets the same sandbox, another payload 409.
  auto first = c.CreateSandbox({{"displayName", "keyed"}}, "create-1");
  ASSERT_EQ(first.status, 202) << first.body;
  auto retry = c.CreateSandbox({{"displayName", "keyed"}}, "create-1");
  EXPECT_EQ(retry.Json()["uid"], first.Json()["uid"]);
  auto other = c.CreateSandbox({{"displayName", "different"}}, "create-1");
  EXPECT_EQ(other.status, 409);
  std::string uid = first.Json()["uid"];
  auto listed = c.Management("GET", "/v1/sandboxes?filter=display_name=keyed").Json();
  EXPECT_EQ(listed["sandboxes"].size(), 1u) << listed.dump();
  c.WaitForStatus(uid, {"running", "failed"}, std::chrono::seconds(300));
  EXPECT_EQ(c.DeleteSandbox(uid).status, 202);

  // Paging: pageSize 1 walks every sandbox once.
  std::set<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = c.Management("GET", "/v1/sandboxes?pageSize=1&orderBy=created_at" +
                                        (token.empty() ? "" : "&pageToken=" + token));
    ASSERT_EQ(page.status, 200);
    auto j = page.Json();
    EXPECT_LE(j["sandboxes"].size(), 1u);
    for (const auto& s : j["sandboxes"]) seen.insert(s["uid"]);
    token = j.value("nextPageToken", "");
    ++pages;
  } while (!token.empty() && pages < 50);
  EXPECT_TRUE(seen.count(*shared_));
  EXPECT_EQ(static_cast<int>(seen.size()), pages);
}

TEST_F(ApiE2ETest, ExecOutputCapKeepsTheExitCode) {
  Client c = NewClient();
  Endpoint ep = SharedEndpoint(c);
  auto r = ep.Exec({{"cmd", {"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; exit 3"}}});
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  auto j = r.Json();
  EXPECT_EQ(j["incomplete"], true);
  EXPECT_EQ(j["exitCode"], 3);
  EXPECT_EQ(UnB64(j["stdout"]).size(), static_cast<size_t>(kExecLimit));
  auto exact = ep.Exec({{"cmd", {"sh", "-c", "head -c 1000 /dev/zero"}}});
  EXPECT_EQ(exact.Json()["incomplete"], false);
}

TEST_F(ApiE2ETest, ProcessesAndInteract) {
  Client c = NewClient();
  Endpoint ep = SharedEndpoint(c);
  // A pipe process: stdin through the WebSocket, output and exit back.
  auto made = ep.Call("POST", "/v1/processes",
                      json{{"cmd", {"sh", "-c", "while read l; do echo got:$l; done; exit 5"}},
                           {"label", "reader"}}.dump());
  ASSERT_EQ(made.status, 201) << made.body;
  std::string id = made.Json()["uid"];
  EXPECT_EQ(made.Json()["name"], "processes/" + id);
  EXPECT_EQ(made.Json()["state"], "running");
  EXPECT_EQ(ep.Call("POST", "/v1/processes", json{{"cmd", {"true"}}, {"label", "reader"}}.dump())
                .status,
            409)
      << "labels are unique";

  sbxapi::Interact ws(ep.uri(), ep.token(), id);
  ASSERT_TRUE(ws.ok()) << ws.refused_status();
  EXPECT_EQ(ws.subprotocol(), "sandboxes.v1");
  ASSERT_TRUE(ws.Send({{"attach", {{"name", "processes/" + id}}}}));
  ASSERT_TRUE(ws.Send({{"stdin", B64("one\ntwo\n")}}));
  ASSERT_TRUE(ws.Send({{"closeStdin", true}}));
  std::string out;
  json exited;
  for (int i = 0; i < 100; ++i) {
    json f = ws.Read();
    if (f.is_null()) break;
    if (f.contains("chunk")) out += UnB64(f["chunk"]["data"]);
    if (f.contains("exited")) exited = f["exited"];
  }
  EXPECT_EQ(out, "got:one\ngot:two\n");
  EXPECT_EQ(exited["exitCode"], 5) << exited.dump();
  EXPECT_EQ(ws.close_code(), 1000);

  // The same output again over REST, resumable from a sequence.
  auto all = ep.Call("GET", "/v1/processes/" + id + "/output?resumeFrom=0").Json();
  std::string again;
  for (const auto& ch : all["chunks"]) again += UnB64(ch["data"]);
  EXPECT_EQ(again, out);
  EXPECT_EQ(all["exited"]["exitCode"], 5);
  std::string last = all["nextResumeFrom"];
  auto rest = ep.Call("GET", "/v1/processes/" + id + "/output?resumeFrom=" + last).Json();
  EXPECT_TRUE(!rest.contains("chunks") || rest["chunks"].empty()) << rest.dump();

  // A pty process: resize reaches the terminal, output is "pty".
  auto tty = ep.Call("POST", "/v1/processes",
                     json{{"cmd", {"sh", "-c", "read x; stty size; exit 0"}},
                          {"pty", {{"initialSize", {{"rows", 24}, {"cols", 80}}}}}}.dump());
  ASSERT_EQ(tty.status, 201) << tty.body;
  std::string tid = tty.Json()["uid"];
  sbxapi::Interact term(ep.uri(), ep.token(), tid, /*token_in_protocol=*/true);
  ASSERT_TRUE(term.ok()) << term.refused_status();
  EXPECT_EQ(term.subprotocol(), "sandboxes.v1") << "only the API subprotocol is echoed";
  ASSERT_TRUE(term.Send({{"attach", {{"name", "processes/" + tid}}}}));
  ASSERT_TRUE(term.Send({{"resize", {{"rows", 40}, {"cols", 132}}}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(term.Send({{"stdin", B64("\n")}}));
  std::string screen;
  std::string stream;
  for (int i = 0; i < 200; ++i) {
    json f = term.Read();
    if (f.is_null()) break;
    if (f.contains("chunk")) {
      screen += UnB64(f["chunk"]["data"]);
      stream = f["chunk"]["stream"];
    }
  }
  EXPECT_NE(screen.find("40 132"), std::string::npos) << screen;
  EXPECT_EQ(stream, "pty");
  EXPECT_EQ(term.close_code(), 1000);

  // Signals.
  auto sleeper = ep.Call("POST", "/v1/processes", json{{"cmd", {"sleep", "300"}}}.dump());
  std::string sid = sleeper.Json()["uid"];
  EXPECT_EQ(ep.Call("POST", "/v1/processes/" + sid + "/signal", json{{"signal", "bogus"}}.dump())
                .status,
            400);
  EXPECT_EQ(ep.Call("POST", "/v1/processes/" + sid + "/signal", json{{"signal", "term"}}.dump())
                .status,
            200);
  json p;
  for (int i = 0; i < 50; ++i) {
    p = ep.Call("GET", "/v1/processes/" + sid).Json();
    if (p["state"] == "exited") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(p["state"], "exited");
  EXPECT_EQ(p["exitCode"], 143);
  auto listed = ep.Call("GET", "/v1/processes").Json();
  EXPECT_GE(listed["processes"].size(), 3u);

  // Refused sessions: wrong attach, no subprotocol, missing credential.
  sbxapi::Interact wrong(ep.uri(), ep.token(), sid);
  ASSERT_TRUE(wrong.ok());
  wrong.Send({{"attach", {{"name", "processes/someone-else"}}}});
  json err = wrong.Read();
  EXPECT_EQ(err["code"], "invalidArgument") << err.dump();
  wrong.Read();
  EXPECT_EQ(wrong.close_code(), 1008);
  sbxapi::Interact unauth(ep.uri(), "alk1.not.valid", sid);
  EXPECT_FALSE(unauth.ok());
  EXPECT_EQ(unauth.refused_status(), 401);
  Endpoint files_only = EndpointFor(c, *shared_, {"sandboxesFilesRead"});
  sbxapi::Interact no_perm(ep.uri(), files_only.token(), sid);
  EXPECT_EQ(no_perm.refused_status(), 403);
}

TEST_F(ApiE2ETest, TimeoutDeletesTheSandboxAndRenewMovesIt) {
  Client c = NewClient();
  auto created = c.CreateSandbox(
      {{"displayName", "ttl"},
       {"resources", {{"cpus", 1}, {"memoryMib", 2048}}},
       {"features", {{"timeouts", {{"timeout", "600s"}, {"onTimeout", "delete"}}}}}});
  ASSERT_EQ(created.status, 202) << created.body;
  std::string uid = created.Json()["uid"];
  json sb = c.WaitForStatus(uid, {"running", "failed"}, std::chrono::seconds(300));
  ASSERT_EQ(sb["core"]["status"], "running");
  ASSERT_TRUE(sb["effectiveFeatures"]["timeouts"].contains("expiresAt")) << sb.dump();
  EXPECT_EQ(sb["effectiveFeatures"]["timeouts"]["onTimeout"], "delete");
  auto renew = c.Management("POST", "/v1/sandboxes/" + uid + "/renew-timeout",
                            json{{"timeout", "5s"}}.dump());
  ASSERT_EQ(renew.status, 200) << renew.body;
  EXPECT_NE(renew.Json()["effectiveFeatures"]["timeouts"]["expiresAt"],
            sb["effectiveFeatures"]["timeouts"]["expiresAt"]);
  EXPECT_EQ(c.Management("POST", "/v1/sandboxes/" + uid + "/renew-timeout", "{}").status, 400);
  // The deadline passes; vmmd deletes it.
  EXPECT_TRUE(c.WaitForStatus(uid, {"__never__"}, std::chrono::seconds(90)).is_null());
  EXPECT_EQ(Airlock({"ls", "--json"}).out.find(uid), std::string::npos);
}

TEST_F(ApiE2ETest, TwoClientsAtOnce) {
  auto work = [](const std::string& label) -> std::string {
    Client c = NewClient();
    auto created = c.CreateSandbox(
        {{"displayName", label}, {"resources", {{"cpus", 1}, {"memoryMib", 2048}}}});
    if (created.status != 202) return "create: " + created.body;
    std::string uid = created.Json()["uid"];
    auto sb = c.WaitForStatus(uid, {"running", "failed"}, std::chrono::seconds(300));
    if (sb["core"]["status"] != "running") return "not running: " + sb.dump();
    Endpoint ep = EndpointFor(c, uid, {"sandboxesExec"});
    std::string got;
    for (int i = 0; i < 5; ++i) {
      auto x = ep.Exec({{"cmd", {"hostname"}}});
      got = UnB64(x.Json()["stdout"]);
    }
    if (got != uid + "\n") return "hostname: " + got;
    if (c.DeleteSandbox(uid).status != 202) return "delete failed";
    if (!c.WaitForStatus(uid, {"__never__"}, std::chrono::seconds(120)).is_null()) return "not gone";
    return "ok";
  };
  auto a = std::async(std::launch::async, work, "client-a");
  auto b = std::async(std::launch::async, work, "client-b");
  EXPECT_EQ(a.get(), "ok");
  EXPECT_EQ(b.get(), "ok");
}

TEST_F(ApiE2ETest, InlineNetworkPoliciesBecomeTheSandboxsRules) {
  Client c = NewClient();
  auto bad = c.CreateSandbox({{"networkPolicies", {{{"mode", "allowAll"}}}}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto created = c.CreateSandbox(
      {{"networkPolicies",
        {{{"mode", "denyAll"}, {"allowNetworks", {"example.com"}}, {"denyNetworks", {"10.0.0.0/8"}}}}}});
  ASSERT_EQ(created.status, 202) << created.body;
  std::string uid = created.Json()["uid"];
  auto rules = Airlock({"policy", "ls", "--sandbox", uid, "--json"});
  ASSERT_EQ(rules.exit_code, 0) << rules.err;
  EXPECT_NE(rules.out.find("example.com"), std::string::npos) << rules.out;
  EXPECT_NE(rules.out.find("10.0.0.0/8"), std::string::npos) << rules.out;
  c.WaitForStatus(uid, {"running", "failed"}, std::chrono::seconds(300));
  ASSERT_EQ(c.DeleteSandbox(uid).status, 202);
  EXPECT_TRUE(c.WaitForStatus(uid, {"__never__"}, std::chrono::seconds(120)).is_null());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto after = Airlock({"policy", "ls", "--json"});
  EXPECT_EQ(after.out.find("10.0.0.0/8"), std::string::npos) << "its rules go with it: " << after.out;
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

TEST_F(ApiE2ETest, PoliciesLogsSecretsAndImagesOverTheirDaemons) {
  Client c = NewClient();
  auto np = c.Management("GET", "/v1/sandboxes/" + *shared_ + "/network-policies");
  ASSERT_EQ(np.status, 200) << np.body;
  EXPECT_EQ(np.Json()["effective"]["mode"], "denyAll");
  EXPECT_EQ(np.Json()["exact"]["selectorVersion"], "destination.v1");
  EXPECT_EQ(c.Management("GET", "/v1/network-policies").status, 200);
  EXPECT_EQ(c.Management("GET", "/v1/sandboxes/no-such-box/network-policies").status, 404);

  // A refused connection from the guest shows in its policy log.
  Endpoint ep = SharedEndpoint(c);
  ep.Exec({{"cmd", {"sh", "-c", "curl -s -m 10 http://blocked.test/ >/dev/null; true"}}});
  json logs;
  for (int i = 0; i < 20; ++i) {
    logs = c.Management("GET", "/v1/sandboxes/" + *shared_ + "/policy-logs").Json();
    if (logs.dump().find("blocked.test") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  bool found = false;
  for (const auto& e : logs["entries"]) {
    if (absl::StrContains(e["resource"].get<std::string>(), "blocked.test")) {
      found = true;
      EXPECT_EQ(e["decision"], "blocked");
      EXPECT_EQ(e["sandbox"], "sandboxes/" + *shared_);
      EXPECT_EQ(e["domain"], "network");
    }
  }
  EXPECT_TRUE(found) << logs.dump();
  EXPECT_EQ(c.Management("GET", "/v1/policy-logs?since=nonsense").status, 400);
  EXPECT_EQ(c.Management("GET", "/v1/policy-logs?since=2000-01-01T00:00:00Z").status, 200);

  // Secrets: metadata only, the value never comes back.
  const std::string value = "s3cr3t-value-never-returned";
  auto made = c.Management("POST", "/v1/secrets",
                           json{{"displayName", "MY_API_TOKEN"},
                                {"custom",
                                 {{"value", value},
                                  {"injection",
                                   {{"hosts", {"api.example.com"}},
                                    {"header", "Authorization"},
                                    {"placeholderTemplate", "sk-test-{rand}"}}}}}}
                               .dump());
  ASSERT_EQ(made.status, 201) << made.body;
  json secret = made.Json();
  EXPECT_EQ(secret["type"], "custom");
  EXPECT_EQ(secret["injection"]["envVar"], "MY_API_TOKEN");
  EXPECT_EQ(secret["placeholder"].get<std::string>().rfind("sk-test-", 0), 0u) << secret.dump();
  std::string sid = secret["uid"];
  auto listed = c.Management("GET", "/v1/secrets");
  EXPECT_NE(listed.body.find(sid), std::string::npos);
  EXPECT_EQ(listed.body.find(value), std::string::npos);
  auto one = c.Management("GET", "/v1/secrets/" + sid);
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.body.find(value), std::string::npos);
  EXPECT_NE(Airlock({"secret", "ls"}).out.find("MY_API_TOKEN"), std::string::npos)
      << "an ordinary Airlock secret";
  EXPECT_EQ(c.Management("POST", "/v1/secrets",
                         json{{"displayName", "x"}, {"serviceType", "nope"},
                              {"token", {{"value", "v"}}}}.dump())
                .status,
            400);
  // Rotation keeps the id and the placeholder.
  auto rotated = c.Management("PUT", "/v1/secrets/" + sid,
                              json{{"custom", {{"value", "rotated-value"},
                                               {"injection", {{"hosts", {"api.example.com"}},
                                                              {"header", "Authorization"}}}}}}
                                  .dump(),
                              {"If-Match: " + one.headers["etag"]});
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  EXPECT_EQ(rotated.Json()["uid"], sid);
  EXPECT_EQ(rotated.Json()["placeholder"], secret["placeholder"]);
  EXPECT_EQ(rotated.body.find("rotated-value"), std::string::npos);
  EXPECT_EQ(c.Management("PUT", "/v1/secrets/" + sid, json{{"token", {{"value", "v"}}}}.dump(),
                         {"If-Match: \"stale\""})
                .status,
            412);
  one = c.Management("GET", "/v1/secrets/" + sid);
  EXPECT_EQ(c.Management("DELETE", "/v1/secrets/" + sid).status, 428);
  EXPECT_EQ(c.Management("DELETE", "/v1/secrets/" + sid, "", {"If-Match: \"stale\""}).status, 412);
  EXPECT_EQ(c.Management("DELETE", "/v1/secrets/" + sid, "", {"If-Match: " + one.headers["etag"]})
                .status,
            200);
  EXPECT_EQ(c.Management("GET", "/v1/secrets/" + sid).status, 404);

  // Images: the store as resources.
  auto images = c.Management("GET", "/v1/images?pageSize=100");
  ASSERT_EQ(images.status, 200) << images.body;
  std::string base_uid;
  json image_list = images.Json()["images"];
  for (const auto& img : image_list) {
    if (absl::StartsWith(img.value("imageRef", ""), "base")) base_uid = img["uid"];
  }
  ASSERT_FALSE(base_uid.empty()) << images.body;
  auto img = c.Management("GET", "/v1/images/" + base_uid);
  ASSERT_EQ(img.status, 200);
  EXPECT_EQ(img.Json()["status"], "completed");
  EXPECT_EQ(c.Management("GET", "/v1/images/" + base_uid, "", {"If-None-Match: " + img.headers["etag"]})
                .status,
            304);
  EXPECT_EQ(c.Management("DELETE", "/v1/images/" + base_uid).status, 428);
  auto in_use = c.Management("DELETE", "/v1/images/" + base_uid, "", {"If-Match: " + img.headers["etag"]});
  EXPECT_EQ(in_use.status, 409) << "the shared sandbox uses it: " << in_use.body;
  EXPECT_EQ(c.Management("POST", "/v1/images", json{{"displayName", "x"}}.dump()).status, 501);
  EXPECT_EQ(c.Management("GET", "/v1/images/ffff").status, 404);
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

TEST_F(ApiE2ETest, MultipartUploadAndDownload) {
  Client c = NewClient();
  Endpoint ep = SharedEndpoint(c);
  const std::string b = "xyzBOUNDARY";
  std::string binary("bin\0\r\n--xyzBOUNDAR", 18);
  std::string body = "--" + b + "\r\nContent-Disposition: form-data; name=\"metadata\"\r\n"
                     "Content-Type: application/json\r\n\r\n{\"path\":\"/tmp/up/one\",\"mode\":448}\r\n"
                     "--" + b + "\r\nContent-Disposition: form-data; name=\"content\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n" + binary + "\r\n"
                     "--" + b + "\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n"
                     "{\"path\":\"/tmp/up/empty\"}\r\n"
                     "--" + b + "\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\n\r\n"
                     "--" + b + "--\r\n";
  ASSERT_EQ(ep.Call("PUT", "/v1/files/directories", json{{"path", "/tmp/up"}}.dump()).status, 200);
  auto up = ep.Call("POST", "/v1/files/upload", body,
                    {"Content-Type: multipart/form-data; boundary=" + b});
  ASSERT_EQ(up.status, 200) << up.body;
  EXPECT_EQ(up.Json()["filesWritten"], 2);
  EXPECT_EQ(ep.ReadFile("/tmp/up/one").body, binary);
  EXPECT_EQ(ep.Call("GET", "/v1/files/stat?path=/tmp/up/one").Json()["info"]["mode"], 0700);
  EXPECT_EQ(ep.Call("GET", "/v1/files/stat?path=/tmp/up/empty").Json()["info"]["mode"], 0644);

  // A truncated body writes nothing.
  auto refused = ep.Call("POST", "/v1/files/upload",
                         "--" + b + "\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n"
                         "{\"path\":\"/tmp/up/never\"}\r\n--" + b +
                             "\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\npartial",
                         {"Content-Type: multipart/form-data; boundary=" + b});
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(ep.Call("GET", "/v1/files/stat?path=/tmp/up/never").status, 404);
  auto encoded = ep.Call("POST", "/v1/files/upload",
                         "--" + b + "\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n"
                         "{\"path\":\"/tmp/up/enc\"}\r\n--" + b +
                             "\r\nContent-Disposition: form-data; name=\"content\"\r\n"
                             "Content-Transfer-Encoding: base64\r\n\r\naGk=\r\n--" + b + "--\r\n",
                         {"Content-Type: multipart/form-data; boundary=" + b});
  EXPECT_EQ(encoded.status, 400);
  EXPECT_EQ(encoded.Json()["details"][0]["@type"], "type.googleapis.com/google.rpc.BadRequest");

  // Download: metadata then content per file, an error part for what fails.
  auto down = ep.Call("GET", "/v1/files/download?paths=/tmp/up/one&paths=/tmp/up/missing&paths=/tmp/up");
  ASSERT_EQ(down.status, 200) << down.body;
  std::string ct = down.headers["content-type"];
  ASSERT_EQ(ct.rfind("multipart/mixed; boundary=", 0), 0u) << ct;
  std::string boundary = ct.substr(strlen("multipart/mixed; boundary="));
  std::string d = down.body;
  EXPECT_NE(d.find("attachment; name=metadata"), std::string::npos);
  EXPECT_NE(d.find(binary), std::string::npos);
  EXPECT_NE(d.find("\"path\":\"/tmp/up/missing\""), std::string::npos);
  EXPECT_NE(d.find("notFound"), std::string::npos);
  EXPECT_NE(d.find("path_authority_nonregular_object"), std::string::npos);
  EXPECT_NE(d.find("--" + boundary + "--"), std::string::npos) << "closed cleanly";
  Endpoint read_only = EndpointFor(c, *shared_, {"sandboxesFilesRead"});
  EXPECT_EQ(read_only.Call("POST", "/v1/files/upload", body,
                           {"Content-Type: multipart/form-data; boundary=" + b})
                .status,
            403);
}

}  // namespace
}  // namespace airlock
