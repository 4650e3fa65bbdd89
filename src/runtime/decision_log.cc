#include "runtime/decision_log.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace carve {

LogLevel EventLogLevel(std::string_view type) {
  static const std::set<std::string_view, std::less<>> kWarn = {
      "job.lost",           "job.reclaim-timed-out",  "node.not-ready",
      "node.declared-dead", "device.unhealthy",       "device.quarantined",
      "device.residue",     "device.relayout-failed", "device.layout-mismatch",
      "node.lost"};
  static const std::set<std::string_view, std::less<>> kDebug = {
      "job.submitted",       "job.waiting",         "job.started",           "job.active",
      "job.lease-renewed",   "job.reclaiming",      "job.cancel-requested",  "job.replica-started",
      "job.replica-exited",  "job.replica-waiting", "job.replica-scheduled", "job.replica-retired",
      "device.reconfiguring"};
  if (kWarn.count(type) > 0) return LogLevel::kWarn;
  if (kDebug.count(type) > 0) return LogLevel::kDebug;
  return LogLevel::kInfo;
}

std::string EventLogLine(const StoredEvent& event) {
  std::string actor = event.actor.empty() ? "" : absl::StrCat(" by ", event.actor);
  return absl::StrCat(event.type, " ", event.subject, actor, ": ", event.reason);
}

std::vector<std::pair<LogLevel, std::string>> EventLogLines(const StoreBatch& batch) {
  std::vector<std::pair<LogLevel, std::string>> lines;
  for (const StoredEvent& e : batch.events) {
    LogLevel level = EventLogLevel(e.type);
    if (LogEnabled(level)) lines.emplace_back(level, EventLogLine(e));
  }
  return lines;
}

}  // namespace carve
