#ifndef CARVE_RUNTIME_DECISION_LOG_H_
#define CARVE_RUNTIME_DECISION_LOG_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ports/store.h"
#include "runtime/log.h"

namespace carve {

// The level the operator's log shows an event at (docs/operations.md): warn for faults (lost
// jobs and nodes, quarantined or unhealthy devices, reclaims that timed out), info for the other
// decisions an operator acts on (nodes registered, jobs scheduled, preempted and ended,
// configuration), debug for routine steps (submitted, started, waiting, lease renewed).
LogLevel EventLogLevel(std::string_view type);
// "job.scheduled job/17 by scheduler: <reason>".
std::string EventLogLine(const StoredEvent& event);
// The lines of the events in `batch` whose level is enabled, to write once the batch committed.
std::vector<std::pair<LogLevel, std::string>> EventLogLines(const StoreBatch& batch);

}  // namespace carve

#endif  // CARVE_RUNTIME_DECISION_LOG_H_
