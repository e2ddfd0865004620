// MIME multipart bodies (RFC 2046) as the files upload and download use
// them: parsing a form-data request body whole (headers per part, the
// closing delimiter required) and writing a multipart/mixed response.
// Pure functions, unit-tested and fuzzable.
#ifndef AIRLOCK_APID_MULTIPART_H_
#define AIRLOCK_APID_MULTIPART_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::apid {

struct MultipartPart {
  // Header names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;
  // The name="..." of its Content-Disposition ("" when none).
  std::string name;
};

// BoundaryOf reads the boundary parameter of a multipart Content-Type;
// INVALID_ARGUMENT when it is not multipart or has none.
absl::StatusOr<std::string> BoundaryOf(absl::string_view content_type);

// ParseMultipart splits `body` into its parts. INVALID_ARGUMENT for a
// missing first delimiter, a part without its header block, or a body
// that ends before the closing delimiter.
absl::StatusOr<std::vector<MultipartPart>> ParseMultipart(absl::string_view body,
                                                          const std::string& boundary);

// WriteMultipart renders `parts` (each with its headers) and the closing
// delimiter.
std::string WriteMultipart(const std::vector<MultipartPart>& parts, const std::string& boundary);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_MULTIPART_H_
