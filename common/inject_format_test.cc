#include "common/inject_format.h"

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

// "<header>: <value placed for "V">" of an accepted header format.
std::string Placed(const std::string& format) {
  auto f = ParseFormat(format);
  EXPECT_TRUE(f.ok()) << format << ": " << f.status();
  if (!f.ok()) return "";
  EXPECT_EQ(f->kind, Format::Kind::kHeader) << format;
  return f->header + ": " + f->HeaderValue("V");
}

TEST(ParseFormatTest, EveryKnownFormat) {
  EXPECT_EQ(Placed("header:x-api-key"), "x-api-key: V");
  EXPECT_EQ(Placed("bearer"), "Authorization: Bearer V");
  EXPECT_EQ(Placed("basic:x-access-token"),
            "Authorization: Basic " + absl::Base64Escape("x-access-token:V"));
  EXPECT_EQ(Placed("basic:"), "Authorization: Basic " + absl::Base64Escape(":V"));
  auto replace = ParseFormat("replace");
  ASSERT_TRUE(replace.ok());
  EXPECT_EQ(replace->kind, Format::Kind::kReplace);
}

TEST(ParseFormatTest, HeaderTemplates) {
  EXPECT_EQ(Placed("header:X-Api-Key=Token %s"), "X-Api-Key: Token V");
  EXPECT_EQ(Placed("header:Authorization=%s"), "Authorization: V");
  EXPECT_EQ(Placed("header:Cookie=session=%s; theme=dark"), "Cookie: session=V; theme=dark");
  // Only "%s" is special: "%%s" is '%' and the marker, "100%" literal.
  EXPECT_EQ(Placed("header:X-K=%%s 100%"), "X-K: %V 100%");
  // An empty template has no "%s".
  EXPECT_FALSE(ParseFormat("header:X-K=").ok());
}

TEST(ParseFormatTest, RefusesWhatCannotBePlaced) {
  for (const char* bad : {
           "",
           "Bearer",
           "carrier-pigeon",
           "header:",
           "header:=Token %s",
           "header:X Key",
           "header:X:Key",
           "header:X-Key=Token",
           "header:X-Key=%s and %s",
           "header:X-Key=Token %s\r\nHost: evil.example",
           "header:X-Key=Tok\xc3\xa9n %s",
           "header:Content-Length",
           "header:content-length=%s",
           "header:Host",
           "header:Transfer-Encoding",
           "header:Proxy-Authorization",
           "basic:a:b",
           "basic:user\n",
       }) {
    auto f = ParseFormat(bad);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << absl::CHexEscape(bad);
    EXPECT_NE(f.status().message().find("format"), std::string::npos) << f.status();
  }
  EXPECT_FALSE(ParseFormat("header:X-Key=" + std::string(kMaxFormatBytes, 'a') + "%s").ok());
}

// What secretsd sends is what it parsed: every accepted format survives the
// wire exactly.
TEST(FormatProtoTest, EveryFormatSurvivesTheWire) {
  for (const char* text : {"replace", "bearer", "basic:x-access-token", "basic:", "header:X-Api-Key",
                           "header:X-Api-Key=Token %s;", "header:x=100% %s"}) {
    auto f = ParseFormat(text);
    ASSERT_TRUE(f.ok()) << text << f.status();
    auto back = FormatFromProto(FormatToProto(*f));
    ASSERT_TRUE(back.ok()) << text << back.status();
    EXPECT_EQ(back->kind, f->kind) << text;
    EXPECT_EQ(back->header, f->header) << text;
    EXPECT_EQ(back->prefix, f->prefix) << text;
    EXPECT_EQ(back->suffix, f->suffix) << text;
    EXPECT_EQ(back->basic, f->basic) << text;
    EXPECT_EQ(back->basic_user, f->basic_user) << text;
    EXPECT_EQ(back->HeaderValue("v"), f->HeaderValue("v")) << text;
  }
}

// A placement no format could say is refused by the reader too.
TEST(FormatProtoTest, APlacementNoFormatCouldSayIsRefused) {
  EXPECT_EQ(FormatFromProto(secrets::v1::CredentialPlacement()).status().message(),
            "the placement names neither a header nor replace");
  auto with = [](auto set) {
    secrets::v1::CredentialPlacement p;
    p.mutable_header()->set_name("X-Key");
    set(p.mutable_header());
    return FormatFromProto(p).status();
  };
  using H = secrets::v1::HeaderPlacement;
  EXPECT_TRUE(with([](H*) {}).ok());
  EXPECT_EQ(with([](H* h) { h->set_name("Content-Length"); }).message(),
            "placement: header Content-Length frames, routes or encodes the request (or proxyd "
            "removes it); a credential cannot go there");
  EXPECT_EQ(with([](H* h) { h->set_name("X Key"); }).message(),
            "placement: the header name is not an HTTP field name");
  EXPECT_EQ(with([](H* h) { h->set_name(""); }).message(), "placement: the header name is empty");
  EXPECT_EQ(with([](H* h) { h->set_prefix("Token\r\nHost: evil "); }).message(),
            "placement: the header's text must be printable ASCII");
  EXPECT_EQ(with([](H* h) { h->set_suffix(std::string(kMaxFormatBytes + 1, 'a')); }).message(),
            "placement: the header's text must be printable ASCII");
  EXPECT_EQ(with([](H* h) {
              h->set_basic(true);
              h->set_basic_user("a:b");
            }).message(),
            "placement: the basic user must be printable ASCII without ':', and only with basic");
  EXPECT_FALSE(with([](H* h) { h->set_basic_user("alice"); }).ok()) << "a user without basic";
}

}  // namespace
}  // namespace airlock
