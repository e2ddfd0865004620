#include "apid/multipart.h"

#include "gtest/gtest.h"

namespace airlock::apid {
namespace {

TEST(MultipartTest, Boundary) {
  EXPECT_EQ(*BoundaryOf("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(*BoundaryOf("multipart/form-data; charset=x; boundary=\"a b\""), "a b");
  EXPECT_FALSE(BoundaryOf("application/json").ok());
  EXPECT_FALSE(BoundaryOf("multipart/form-data").ok());
}

TEST(MultipartTest, RoundTrip) {
  std::vector<MultipartPart> parts(2);
  parts[0].headers["Content-Disposition"] = "form-data; name=\"metadata\"";
  parts[0].body = R"({"path":"/tmp/a"})";
  parts[1].headers["Content-Disposition"] = "form-data; name=\"content\"";
  parts[1].body = std::string("bin\0\r\n--ary", 12);
  std::string body = WriteMultipart(parts, "BOUNDARY");
  auto back = ParseMultipart(body, "BOUNDARY");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].name, "metadata");
  EXPECT_EQ((*back)[1].name, "content");
  EXPECT_EQ((*back)[1].body, parts[1].body);
  EXPECT_EQ((*back)[0].headers.at("content-disposition"), "form-data; name=\"metadata\"");
}

TEST(MultipartTest, RefusesTruncatedAndMalformed) {
  EXPECT_FALSE(ParseMultipart("no boundary here", "B").ok());
  std::string truncated = "--B\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\nabc";
  auto t = ParseMultipart(truncated, "B");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos);
  EXPECT_FALSE(ParseMultipart("--B\r\nbad header\r\n\r\nx\r\n--B--", "B").ok());
  EXPECT_FALSE(ParseMultipart("--Bxx", "B").ok());
  // Hostile shapes: a delimiter at byte 1, empty header blocks, parts
  // that end at once; each is refused or parsed without copying the rest.
  EXPECT_FALSE(ParseMultipart("x--B--", "B").ok());
  std::string many = "--B";
  for (int i = 0; i < 1000; ++i) many += "\r\n\r\n\r\n--B";
  many += "--";
  auto parsed = ParseMultipart(many, "B");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), 1000u);
  for (const auto& p : *parsed) EXPECT_EQ(p.body, "");
  EXPECT_FALSE(ParseMultipart("--B\r\nX:y\r\n\r\n--B--", "B").ok())
      << "a header block cut by the delimiter";
  std::string too_many = "--B";
  for (int i = 0; i < 5000; ++i) too_many += "\r\n\r\nx\r\n--B";
  too_many += "--";
  EXPECT_FALSE(ParseMultipart(too_many, "B").ok());
  auto preamble = ParseMultipart("ignored\r\n--B\r\n\r\nbody\r\n--B--", "B");
  ASSERT_TRUE(preamble.ok());
  EXPECT_EQ((*preamble)[0].body, "body");
  auto empty = ParseMultipart("--B--\r\n", "B");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace airlock::apid
