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
  // At most this many parts: a hostile body cannot make many.
  constexpr size_t kMaxParts = 4096;
  const std::string delim = "--" + boundary;
  const std::string next_delim = "\r\n" + delim;
  std::vector<MultipartPart> out;
  size_t pos;
  if (body.substr(0, delim.size()) == delim) {
    pos = 0;
  } else {
    // A preamble ends with CRLF before the first delimiter.
    pos = body.find(next_delim);
    if (pos == absl::string_view::npos) {
      return absl::InvalidArgumentError("the body does not start with the multipart boundary");
    }
    pos += 2;
  }
  pos += delim.size();
  for (;;) {
    if (body.substr(pos, 2) == "--") return out;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") {
      return absl::InvalidArgumentError("a multipart boundary line is malformed");
    }
    pos += 2;
    if (out.size() >= kMaxParts) {
      return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxParts, " multipart parts"));
    }
    // The part runs to the next CRLF + delimiter; its header block (maybe
    // empty) ends at the first blank line inside it.
    size_t end = body.find(next_delim, pos);
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          "the multipart body ends before its closing boundary (truncated)");
    }
    absl::string_view part_text = body.substr(pos, end - pos);
    absl::string_view headers, content;
    if (part_text.substr(0, 2) == "\r\n") {
      content = part_text.substr(2);  // no headers
    } else {
      size_t blank = part_text.find("\r\n\r\n");
      if (blank == absl::string_view::npos) {
        return absl::InvalidArgumentError("a multipart part has no header block");
      }
      headers = part_text.substr(0, blank);
      content = part_text.substr(blank + 4);
    }
    MultipartPart part;
    part.body = std::string(content);
    for (absl::string_view line : absl::StrSplit(headers, "\r\n", absl::SkipEmpty())) {
      size_t colon = line.find(':');
      if (colon == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("bad part header \"", line.substr(0, 80), "\""));
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
    pos = end + next_delim.size();
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
