#include "common/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

std::mutex g_mu;
std::string g_identity = "airlock";
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

}  // namespace

void SetLogIdentity(absl::string_view name) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_identity = std::string(name);
}

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning,
                     LogLevel::kError}) {
    if (text == LevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

std::string FormatLogLine(double unix_time, LogLevel level,
                          absl::string_view daemon, absl::string_view msg,
                          std::initializer_list<LogField> fields) {
  time_t secs = static_cast<time_t>(unix_time);
  struct tm tm;
  gmtime_r(&secs, &tm);
  int millis = static_cast<int>((unix_time - secs) * 1000);
  nlohmann::ordered_json line;
  line["ts"] = absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                               tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                               tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  line["level"] = LevelName(level);
  line["daemon"] = std::string(daemon);
  line["msg"] = std::string(msg);
  for (const auto& f : fields) line[std::string(f.first)] = f.second;
  // Invalid UTF-8 from a peer must not make logging throw.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Log(LogLevel level, absl::string_view msg,
         std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level) return;
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  std::lock_guard<std::mutex> lock(g_mu);
  std::string line = FormatLogLine(tv.tv_sec + tv.tv_usec / 1e6, level,
                                   g_identity, msg, fields);
  line.push_back('\n');
  // One write per line so lines from several threads never interleave.
  ssize_t unused = write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace airlock
