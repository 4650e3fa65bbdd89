#include "runtime/log.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "runtime/input_limits.h"
#include "spdlog/logger.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace carve {

namespace {

constexpr const char* kNames[] = {"trace", "debug", "info", "warn", "error", "off"};

std::atomic<int> current_level{static_cast<int>(LogLevel::kInfo)};
std::mutex sink_mu;
std::function<void(LogLevel, const std::string&)>* test_sink = nullptr;

// Never destroyed: threads may still log while the process exits.
spdlog::logger& Logger() {
  static spdlog::logger* logger = [] {
    auto* l = new spdlog::logger("carve", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
    l->set_level(spdlog::level::trace);  // the level is checked here, in LogEnabled
    l->flush_on(spdlog::level::trace);   // stderr may be a file read while the server runs
    return l;
  }();
  return *logger;
}

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      break;
  }
  return spdlog::level::off;
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(LogLevel::kOff); ++i) {
    if (name == kNames[i]) return static_cast<LogLevel>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "log level \"", std::string(name), "\": one of trace, debug, info, warn, error, off"));
}

const char* LogLevelName(LogLevel level) { return kNames[static_cast<int>(level)]; }

void SetLogLevel(LogLevel level) { current_level = static_cast<int>(level); }

bool LogEnabled(LogLevel level) {
  return level != LogLevel::kOff && static_cast<int>(level) >= current_level.load();
}

void LogLine(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line(message);
  std::replace_if(
      line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  // Agents' reports (health reasons, residue commands) reach the log through events: ESC, BEL and
  // the other control characters are written as escapes, never raw to the operator's terminal.
  line = TerminalSafe(line);
  Logger().log(ToSpdlog(level), "{}", line);
  std::lock_guard<std::mutex> lock(sink_mu);
  if (test_sink != nullptr) (*test_sink)(level, line);
}

void SetLogSinkForTest(std::function<void(LogLevel, const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(sink_mu);
  delete test_sink;
  test_sink =
      sink ? new std::function<void(LogLevel, const std::string&)>(std::move(sink)) : nullptr;
}

}  // namespace carve
