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

}  // namespace
}  // namespace airlock
