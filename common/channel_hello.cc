#include "common/channel_hello.h"

#include "absl/strings/match.h"

namespace airlock {

bool FindLine(std::string* buf, absl::string_view prefix, std::string* rest) {
  while (true) {
    size_t nl = buf->find('\n');
    if (nl == std::string::npos) {
      // Keep a partial line, but not an unbounded amount of junk.
      if (buf->size() > 4096) buf->erase(0, buf->size() - 256);
      return false;
    }
    absl::string_view line(buf->data(), nl);
    if (absl::StartsWith(line, prefix)) {
      *rest = std::string(line.substr(prefix.size()));
      buf->erase(0, nl + 1);
      return true;
    }
    buf->erase(0, nl + 1);
  }
}

}  // namespace airlock
