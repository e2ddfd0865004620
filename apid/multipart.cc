#include "apid/multipart.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace airlock::apid {

absl::StatusOr<std::string> BoundaryOf(absl::string_view content_type) {
  std::vector<absl::string_view> parts = absl::StrSplit(content_type, ';');
  std::string type = absl::AsciiStrToLower(absl::StripAsciiWhitespace(parts[0]));
  if (!absl::StartsWith(type, "multipart/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("Content-Type must be multipart/form-data, not \"", content_type, "\""));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    absl::string_view p = absl::StripAsciiWhitespace(parts[i]);
    if (!absl::StartsWithIgnoreCase(p, "boundary=")) continue;
    std::string b(p.substr(9));
    if (b.size() >= 2 && b.front() == '"' && b.back() == '"') b = b.substr(1, b.size() - 2);
    if (b.empty() || b.size() > 70) break;
    return b;
  }
  return absl::InvalidArgumentError("the multipart Content-Type has no valid boundary");
}

absl::StatusOr<std::vector<MultipartPart>> ParseMultipart(absl::string_view body,
                                                          const std::string& boundary) {
  const std::string delim = "--" + boundary;
  std::vector<MultipartPart> out;
  size_t pos = body.find(delim);
  if (pos == absl::string_view::npos || (pos != 0 && body.substr(pos - 2, 2) != "\r\n")) {
    return absl::InvalidArgumentError("the body does not start with the multipart boundary");
  }
  pos += delim.size();
  for (;;) {
    if (body.substr(pos, 2) == "--") return out;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") {
      return absl::InvalidArgumentError("a multipart boundary line is malformed");
    }
    pos += 2;
    size_t header_end = body.find("\r\n\r\n", pos);
    size_t next = body.find("\r\n" + delim, pos);
    if (next == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          "the multipart body ends before its closing boundary (truncated)");
    }
    MultipartPart part;
    absl::string_view headers;
    if (header_end != absl::string_view::npos && header_end <= next) {
      headers = body.substr(pos, header_end - pos);
      part.body = std::string(body.substr(header_end + 4, next - header_end - 4));
    } else if (body.substr(pos, 2) == "\r\n") {
      part.body = std::string(body.substr(pos + 2, next - pos - 2));
    } else {
      return absl::InvalidArgumentError("a multipart part has no header block");
    }
    for (absl::string_view line : absl::StrSplit(headers, "\r\n", absl::SkipEmpty())) {
      size_t colon = line.find(':');
      if (colon == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("bad part header \"", line, "\""));
      }
      part.headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon)))] =
          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
    auto cd = part.headers.find("content-disposition");
    if (cd != part.headers.end()) {
      for (absl::string_view p : absl::StrSplit(cd->second, ';')) {
        p = absl::StripAsciiWhitespace(p);
        if (absl::StartsWith(p, "name=")) {
          std::string n(p.substr(5));
          if (n.size() >= 2 && n.front() == '"' && n.back() == '"') n = n.substr(1, n.size() - 2);
          part.name = n;
        }
      }
    }
    out.push_back(std::move(part));
    pos = next + 2 + delim.size();
  }
}

std::string WriteMultipart(const std::vector<MultipartPart>& parts, const std::string& boundary) {
  std::string out;
  for (const auto& p : parts) {
    absl::StrAppend(&out, "--", boundary, "\r\n");
    for (const auto& [k, v] : p.headers) absl::StrAppend(&out, k, ": ", v, "\r\n");
    absl::StrAppend(&out, "\r\n", p.body, "\r\n");
  }
  absl::StrAppend(&out, "--", boundary, "--\r\n");
  return out;
}

}  // namespace airlock::apid
