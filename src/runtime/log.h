#ifndef CARVE_RUNTIME_LOG_H_
#define CARVE_RUNTIME_LOG_H_

// The operator's log: one line per decision worth attention, on stderr (docs/operations.md).
// A thin wrapper over spdlog, so that only log.cc depends on its API:
//   LogInfo("listening on ", url);
// The arguments are joined with absl::StrCat, and only when the level is enabled.

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace carve {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// "trace", "debug", "info", "warn", "error" or "off"; InvalidArgument names the choices.
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name);
const char* LogLevelName(LogLevel level);
// The process-wide level (default info).
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
// Writes one line (newlines in `message` become spaces) if `level` is enabled.
void LogLine(LogLevel level, std::string_view message);
// Tests: every enabled line also goes to `sink` (an empty function stops that).
void SetLogSinkForTest(std::function<void(LogLevel, const std::string&)> sink);

template <typename... Args>
void LogAt(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) LogLine(level, absl::StrCat(args...));
}
template <typename... Args>
void LogTrace(const Args&... args) {
  LogAt(LogLevel::kTrace, args...);
}
template <typename... Args>
void LogDebug(const Args&... args) {
  LogAt(LogLevel::kDebug, args...);
}
template <typename... Args>
void LogInfo(const Args&... args) {
  LogAt(LogLevel::kInfo, args...);
}
template <typename... Args>
void LogWarn(const Args&... args) {
  LogAt(LogLevel::kWarn, args...);
}
template <typename... Args>
void LogError(const Args&... args) {
  LogAt(LogLevel::kError, args...);
}

}  // namespace carve

#endif  // CARVE_RUNTIME_LOG_H_
