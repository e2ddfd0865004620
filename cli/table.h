// Human tables in the style of `docker ps`: upper-case headers, columns
// padded to the widest cell, three spaces between columns.
#ifndef AIRLOCK_CLI_TABLE_H_
#define AIRLOCK_CLI_TABLE_H_

#include <time.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace airlock::cli {

// PrintTable writes `header` and `rows` aligned; the last column is not
// padded.
inline void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], r[i].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t i = 0; i < cells.size(); ++i) {
      l += cells[i];
      if (i + 1 < cells.size()) l += std::string(width[i] - cells[i].size() + 3, ' ');
    }
    out << l << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

// Age is how long ago the Unix time `created` was, as docker prints it in
// tables ("5 minutes ago").
inline std::string Age(int64_t created) {
  int64_t d = time(nullptr) - created;
  if (d < 60) return std::to_string(d) + " seconds ago";
  if (d < 3600) return std::to_string(d / 60) + " minutes ago";
  if (d < 86400) return std::to_string(d / 3600) + " hours ago";
  return std::to_string(d / 86400) + " days ago";
}

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_TABLE_H_
