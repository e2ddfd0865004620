// Structured logging: one JSON object per line on stderr (or a file), with
// time, level, daemon and message plus any key/value fields.
#ifndef AIRLOCK_COMMON_LOG_H_
#define AIRLOCK_COMMON_LOG_H_

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace airlock {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// SetLogIdentity names the process in every later line ("vmmd").
void SetLogIdentity(absl::string_view name);

// SetLogLevel drops lines below `level`.
void SetLogLevel(LogLevel level);

// ParseLogLevel reads "debug", "info", "warning" or "error".
bool ParseLogLevel(absl::string_view text, LogLevel* level);

using LogField = std::pair<absl::string_view, std::string>;

// Log writes one line: {"ts":...,"level":...,"daemon":...,"msg":...,k:v...}.
// It is thread-safe and never throws. Never pass secret values as fields.
void Log(LogLevel level, absl::string_view msg,
         std::initializer_list<LogField> fields = {});

// FormatLogLine is Log's formatting, exposed for tests.
std::string FormatLogLine(double unix_time, LogLevel level,
                          absl::string_view daemon, absl::string_view msg,
                          std::initializer_list<LogField> fields);

}  // namespace airlock

#define AIRLOCK_LOG_INFO(...) ::airlock::Log(::airlock::LogLevel::kInfo, __VA_ARGS__)
#define AIRLOCK_LOG_WARN(...) ::airlock::Log(::airlock::LogLevel::kWarning, __VA_ARGS__)
#define AIRLOCK_LOG_ERROR(...) ::airlock::Log(::airlock::LogLevel::kError, __VA_ARGS__)
#define AIRLOCK_LOG_DEBUG(...) ::airlock::Log(::airlock::LogLevel::kDebug, __VA_ARGS__)

#endif  // AIRLOCK_COMMON_LOG_H_
