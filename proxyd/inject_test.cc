#include "proxyd/inject.h"

#include <zlib.h>

#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

// P is a credential as proxyd gets it: its format text parsed by secretsd
// (ParseFormat, FormatToProto) and read back from the wire.
Placement P(const std::string& id, const std::string& sentinel, const std::string& value,
            const std::string& format) {
  secrets::v1::Credential c;
  c.set_id(id);
  c.set_sentinel(sentinel);
  c.set_value(value);
  c.set_format(format);
  if (auto parsed = ParseFormat(format); parsed.ok()) *c.mutable_placement() = FormatToProto(*parsed);
  return PlacementFromWire(c);
}

RequestHead Req(std::vector<Header> headers, std::string target = "/v1/messages") {
  RequestHead r;
  r.method = "POST";
  r.target = std::move(target);
  r.version = "HTTP/1.1";
  r.headers = std::move(headers);
  return r;
}

const Placement kAnthropic = P("anthropic@global", "proxy-managed", "sk-real-1", "header:x-api-key");
const Placement kOpenAi = P("openai@global", "proxy-managed", "sk-real-2", "bearer");
const Placement kGit = P("github@global", "proxy-managed", "ghp_real", "basic:x-access-token");
const Placement kCustom = P("custom:TOKEN@global", "sbx-cs-0123456789abcdef", "real-custom", "replace");

TEST(InjectHeadTest, HeaderFormatsReplaceTheSentinelOrFillTheGap) {
  RequestHead r = Req({{"x-api-key", "proxy-managed"}});
  auto placed = InjectHead(&r, {kAnthropic});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(r.Get("x-api-key"), "sk-real-1");
  EXPECT_EQ(*placed, std::vector<std::string>{"anthropic@global"});

  RequestHead missing = Req({});
  ASSERT_TRUE(InjectHead(&missing, {kOpenAi}).ok());
  EXPECT_EQ(missing.Get("Authorization"), "Bearer sk-real-2");

  RequestHead bearer = Req({{"Authorization", "Bearer proxy-managed"}});
  ASSERT_TRUE(InjectHead(&bearer, {kOpenAi}).ok());
  EXPECT_EQ(bearer.Get("authorization"), "Bearer sk-real-2");
}

TEST(InjectHeadTest, TheGuestsOwnValueIsLeftAlone) {
  RequestHead r = Req({{"x-api-key", "my-own-key"}});
  auto placed = InjectHead(&r, {kAnthropic});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(r.Get("x-api-key"), "my-own-key");
  EXPECT_TRUE(placed->empty());
}

TEST(InjectHeadTest, BasicAuthForGit) {
  RequestHead r = Req({}, "/o/r.git/info/refs?service=git-upload-pack");
  ASSERT_TRUE(InjectHead(&r, {kGit}).ok());
  EXPECT_EQ(r.Get("Authorization"), "Basic " + Base64("x-access-token:ghp_real"));
  // git configured with the sentinel as its password.
  RequestHead s = Req({{"Authorization", "Basic " + Base64("me:proxy-managed")}});
  ASSERT_TRUE(InjectHead(&s, {kGit}).ok());
  EXPECT_EQ(s.Get("Authorization"), "Basic " + Base64("x-access-token:ghp_real"));
  RequestHead own = Req({{"Authorization", "Basic " + Base64("me:mine")}});
  ASSERT_TRUE(InjectHead(&own, {kGit}).ok());
  EXPECT_EQ(own.Get("Authorization"), "Basic " + Base64("me:mine"));
}

// A registry credential has no sentinel: it fills a missing Authorization
// (dockerd's first request) and never takes the place of the engine's own
// (a Bearer token from the registry's token service).
TEST(InjectHeadTest, RegistryCredentialOnlyFillsTheGap) {
  const Placement registry = P("registry:reg.test:5000@global", "", "s3cret", "basic:alice");
  RequestHead missing = Req({}, "/v2/");
  missing.method = "GET";
  ASSERT_TRUE(InjectHead(&missing, {registry}).ok());
  EXPECT_EQ(missing.Get("Authorization"), "Basic " + Base64("alice:s3cret"));
  RequestHead bearer = Req({{"Authorization", "Bearer eyJ-token"}}, "/v2/o/r/manifests/1");
  bearer.method = "GET";
  auto placed = InjectHead(&bearer, {registry});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(bearer.Get("Authorization"), "Bearer eyJ-token");
  EXPECT_TRUE(placed->empty());
  RequestHead basic = Req({{"Authorization", "Basic " + Base64("bob:other")}});
  basic.method = "GET";
  ASSERT_TRUE(InjectHead(&basic, {registry}).ok());
  EXPECT_EQ(basic.Get("Authorization"), "Basic " + Base64("bob:other"));
}

// With the host's registry credential a guest may pull, and nothing more.
TEST(InjectHeadTest, RegistryCredentialOnlyForReadsAndPullScopes) {
  const Placement registry = P("registry:reg.test@global", "", "s3cret", "basic:alice");
  auto carries = [&](const std::string& method, const std::string& target) {
    RequestHead r = Req({}, target);
    r.method = method;
    EXPECT_TRUE(InjectHead(&r, {registry}).ok());
    return !r.Get("Authorization").empty();
  };
  EXPECT_TRUE(carries("GET", "/v2/"));
  EXPECT_TRUE(carries("HEAD", "/v2/o/r/manifests/v1"));
  EXPECT_TRUE(carries("GET", "/token?scope=repository%3Ao%2Fr%3Apull&service=reg.test"));
  EXPECT_TRUE(carries("GET", "/token?scope=repository:o/r:pull+repository:o/s:pull"));
  EXPECT_FALSE(carries("PUT", "/v2/o/r/manifests/v1"));
  EXPECT_FALSE(carries("POST", "/v2/o/r/blobs/uploads/"));
  EXPECT_FALSE(carries("DELETE", "/v2/o/r/manifests/sha256:00"));
  EXPECT_FALSE(carries("POST", "/token"));
  EXPECT_FALSE(carries("GET", "/token?scope=repository:o/r:pull,push&service=reg.test"));
  EXPECT_FALSE(carries("GET", "/token?scope=repository%3Ao%2Fr%3A%2A"));
  EXPECT_FALSE(carries("GET", "/token?scope=repository:o/r:pull+repository:o/s:delete"));
  EXPECT_FALSE(carries("GET", "/token?scope=repository:o/r:pull&offline_token=true"));
  EXPECT_FALSE(carries("GET", "/token?scope=repository:o/r:pull%zz"));
  // Other credentials are not limited this way.
  RequestHead post = Req({});
  ASSERT_TRUE(InjectHead(&post, {kOpenAi}).ok());
  EXPECT_EQ(post.Get("Authorization"), "Bearer sk-real-2");
}

TEST(InjectHeadTest, ReplaceSwapsPlaceholdersInHeadersAndTarget) {
  RequestHead r = Req({{"X-Token", "t=sbx-cs-0123456789abcdef"}, {"Other", "x"}},
                      "/q?key=sbx-cs-0123456789abcdef");
  auto placed = InjectHead(&r, {kCustom});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(r.Get("X-Token"), "t=real-custom");
  EXPECT_EQ(r.target, "/q?key=real-custom");
  EXPECT_EQ(r.Get("Other"), "x");
}

TEST(InjectHeadTest, HeaderTemplatesFollowTheSameFillRule) {
  const Placement kit = P("codeforge@global", "proxy-managed", "cf-real", "header:X-Api-Key=Token %s");
  RequestHead missing = Req({});
  auto placed = InjectHead(&missing, {kit});
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(missing.Get("x-api-key"), "Token cf-real");
  EXPECT_EQ(*placed, std::vector<std::string>{"codeforge@global"});

  // The sentinel inside the template's own text, or bare.
  RequestHead templated = Req({{"X-Api-Key", "Token proxy-managed"}});
  ASSERT_TRUE(InjectHead(&templated, {kit}).ok());
  EXPECT_EQ(templated.Get("X-Api-Key"), "Token cf-real");
  RequestHead bare = Req({{"X-Api-Key", "proxy-managed"}});
  ASSERT_TRUE(InjectHead(&bare, {kit}).ok());
  EXPECT_EQ(bare.Get("X-Api-Key"), "Token cf-real");

  RequestHead own = Req({{"X-Api-Key", "Token mine"}});
  placed = InjectHead(&own, {kit});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(own.Get("X-Api-Key"), "Token mine");
  EXPECT_TRUE(placed->empty());
}

TEST(InjectHeadTest, AHeaderThatFramesTheRequestIsRefused) {
  RequestHead r = Req({{"x-api-key", "proxy-managed"}});
  // secretsd would not send it (ParseFormat refuses the text); a placement
  // naming it anyway is refused by proxyd too.
  secrets::v1::Credential wire;
  wire.set_id("x@global");
  wire.set_sentinel("proxy-managed");
  wire.set_value("v");
  wire.mutable_placement()->mutable_header()->set_name("Content-Length");
  Placement framing = PlacementFromWire(wire);
  EXPECT_NE(framing.invalid.find("header Content-Length frames, routes or encodes the request"),
            std::string::npos)
      << framing.invalid;
  auto placed = InjectHead(&r, {kAnthropic, framing});
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(placed.status().message().find("x@global"), std::string::npos) << placed.status();
  EXPECT_EQ(r.Get("x-api-key"), "proxy-managed") << "no half-rewritten request";
  EXPECT_EQ(r.Get("Content-Length"), "");
}

TEST(InjectHeadTest, UnknownFormatChangesNothing) {
  RequestHead r = Req({{"x-api-key", "proxy-managed"}});
  Placement bad = P("x@global", "proxy-managed", "v", "carrier-pigeon");
  EXPECT_FALSE(InjectHead(&r, {kAnthropic, bad}).ok());
  EXPECT_EQ(r.Get("x-api-key"), "proxy-managed") << "no half-rewritten request";
}

std::string Gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(in.size() + 128, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = in.size();
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = out.size();
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(InjectBodyTest, IdentityBodiesGetPlaceholdersReplaced) {
  RequestHead r = Req({{"Content-Type", "application/json"}});
  std::string body = R"({"token":"sbx-cs-0123456789abcdef"})";
  std::vector<std::string> placed;
  ASSERT_TRUE(InjectBody(r, {kCustom}, &body, &placed).ok());
  EXPECT_EQ(body, R"({"token":"real-custom"})");
  EXPECT_EQ(placed.size(), 1u);
}

TEST(InjectBodyTest, ASentinelInACompressedBodyIsRefused) {
  RequestHead r = Req({{"Content-Encoding", "gzip"}});
  std::string body = Gzip(R"({"token":"sbx-cs-0123456789abcdef"})");
  std::vector<std::string> placed;
  absl::Status s = InjectBody(r, {kCustom}, &body, &placed);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("compressed"), std::string::npos);
  // The same body without a sentinel goes as it is.
  std::string clean = Gzip(R"({"hello":"world"})");
  std::string copy = clean;
  EXPECT_TRUE(InjectBody(r, {kCustom}, &clean, &placed).ok());
  EXPECT_EQ(clean, copy);
}

}  // namespace
}  // namespace airlock::proxyd
