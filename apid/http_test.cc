// apid's HTTP layer: target parsing, routing, the error shape, strict JSON
// bodies, and the Beast server on a real loopback socket (keep-alive, a
// refused non-loopback address, an oversized body).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "apid/api_error.h"
#include "apid/http_server.h"
#include "apid/router.h"
#include "apid/wire_json.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "protos/api/v1/wire.pb.h"

namespace airlock::apid {
namespace {

TEST(SplitTargetTest, DecodesPathAndQuery) {
  std::string path;
  std::vector<std::pair<std::string, std::string>> q;
  ASSERT_TRUE(SplitTarget("/v1/files/content?path=%2Ftmp%2Fa%20b&mode=420&x", &path, &q));
  EXPECT_EQ(path, "/v1/files/content");
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].second, "/tmp/a b");
  EXPECT_EQ(q[1].second, "420");
  EXPECT_EQ(q[2].first, "x");
  EXPECT_FALSE(SplitTarget("/a?path=%zz", &path, &q));
  EXPECT_FALSE(SplitTarget("/a%2", &path, &q));
}

TEST(RouterTest, MatchesParamsAndRefusesOtherMethods) {
  Router r;
  r.Add("GET", "/v1/sandboxes/{sandbox}", [](const HttpRequest&, const PathParams& p) {
    HttpResponse out;
    out.body = p.at("sandbox");
    return out;
  });
  HttpRequest get{"GET", "/v1/sandboxes/shell-1", {}, {}, ""};
  EXPECT_EQ(r.Handle(get).body, "shell-1");
  HttpRequest put{"PUT", "/v1/sandboxes/shell-1", {}, {}, ""};
  HttpResponse refused = r.Handle(put);
  EXPECT_EQ(refused.status, 405);
  EXPECT_EQ(refused.headers["Allow"], "GET");
  HttpRequest other{"GET", "/v1/nothing", {}, {}, ""};
  HttpResponse missing = r.Handle(other);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(nlohmann::json::parse(missing.body)["code"], "notFound");
}

TEST(ApiErrorTest, ShapesAndStatuses) {
  auto e = ApiError::EtagMismatch("\"abc\"");
  EXPECT_EQ(e.status, 412);
  auto body = nlohmann::json::parse(ErrorResponse(e).body);
  EXPECT_EQ(body["code"], "failedPrecondition");
  EXPECT_EQ(body["details"][0]["@type"], "type.googleapis.com/docker.sandboxes.v1.EtagMismatch");
  EXPECT_EQ(body["details"][0]["currentEtag"], "\"abc\"");
  EXPECT_EQ(ApiError::EtagRequired().status, 428);
  EXPECT_EQ(ApiError::IdempotencyConflict().status, 409);
  EXPECT_EQ(ApiError::Unimplemented("createSnapshot").status, 501);
  EXPECT_EQ(FromStatus(absl::NotFoundError("x")).status, 404);
  EXPECT_EQ(FromStatus(absl::AlreadyExistsError("x")).code, "alreadyExists");
  EXPECT_EQ(FromStatus(absl::UnavailableError("x")).status, 503);
  EXPECT_EQ(nlohmann::json::parse(ErrorResponse(ApiError::NotFound("gone")).body)["details"],
            nlohmann::json::array());
}

TEST(WireJsonTest, StrictBodies) {
  airlock::api::wire::v1::CreateSandboxRequest req;
  EXPECT_FALSE(ParseBody(R"({"displayName":"a","resources":{"cpus":2,"memoryMib":"4096"}})",
                         &req).has_value());
  EXPECT_EQ(req.resources().memory_mib(), 4096) << "int64 as a string is accepted";
  auto unknown = ParseBody(R"({"displayName":"a","bogus":1})", &req);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->code, "invalidArgument");
  EXPECT_NE(unknown->message.find("bogus"), std::string::npos) << unknown->message;
  auto nested = ParseBody(R"({"resources":{"cpu":2}})", &req);
  ASSERT_TRUE(nested.has_value()) << "unknown fields are refused at every level";
  EXPECT_TRUE(ParseBody("[1]", &req).has_value());
  EXPECT_TRUE(ParseBody("", &req).has_value());
  EXPECT_FALSE(ParseBody("", &req, true).has_value());
  EXPECT_TRUE(ParseBody(R"({"displayName":7})", &req).has_value());
  airlock::api::wire::v1::RenewSandboxTimeoutRequest renew;
  EXPECT_FALSE(ParseBody(R"({"timeout":"1.5s"})", &renew).has_value());
  EXPECT_EQ(renew.timeout().seconds(), 1);
  EXPECT_EQ(renew.timeout().nanos(), 500000000);
  EXPECT_TRUE(ParseBody(R"({"timeout":"soon"})", &renew).has_value());
  airlock::api::wire::v1::ExecResponse out;
  out.set_exit_code(0);
  out.set_stdout("hi\n");
  out.set_incomplete(false);
  auto printed = nlohmann::json::parse(ToJson(out));
  EXPECT_EQ(printed["exitCode"], 0) << "a zero exit code is still printed";
  EXPECT_EQ(printed["stdout"], "aGkK");
  EXPECT_EQ(printed["incomplete"], false);
}

// Sends raw bytes to 127.0.0.1:port and reads until the peer closes.
std::string Exchange(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return "connect failed";
  (void)!write(fd, bytes.data(), bytes.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST(HttpServerTest, ServesKeepAliveAndRefusesBadInput) {
  HttpServerOptions o;
  o.listen = "127.0.0.1:0";
  o.max_body_bytes = 1024;
  HttpServer server(o, [](const HttpRequest& req) {
    HttpResponse r;
    r.body = req.method + " " + req.path + " " + req.Param("q") + " " + req.body;
    return r;
  }, nullptr);
  ASSERT_TRUE(server.Start().ok());
  std::string two = Exchange(
      server.port(),
      "GET /a?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
  EXPECT_NE(two.find("GET /a 1 "), std::string::npos) << two;
  EXPECT_NE(two.find("POST /b  hi"), std::string::npos) << "both answered on one connection";
  std::string big = Exchange(server.port(), "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" +
                                                std::string(5000, 'x'));
  EXPECT_NE(big.find("413"), std::string::npos) << big;
  std::string bad = Exchange(server.port(), "NOT HTTP\r\n\r\n");
  EXPECT_NE(bad.find("400"), std::string::npos) << bad;
  server.Stop();

  HttpServerOptions wide;
  wide.listen = "0.0.0.0:0";
  HttpServer refused(wide, [](const HttpRequest&) { return HttpResponse(); }, nullptr);
  absl::Status s = refused.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("give --http-tls-cert and --http-tls-key"), std::string::npos) << s.message();
  EXPECT_TRUE(IsLoopbackListen("127.0.0.2:80"));
  EXPECT_TRUE(IsLoopbackListen("[::1]:80"));
  EXPECT_FALSE(IsLoopbackListen("10.0.0.1:80"));
}

}  // namespace
}  // namespace airlock::apid
