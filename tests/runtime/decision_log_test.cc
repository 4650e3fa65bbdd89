#include "runtime/decision_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carve {
namespace {

TEST(DecisionLogTest, FaultsWarnDecisionsInformRoutineIsDebug) {
  for (const char* type : {"job.lost", "node.not-ready", "device.quarantined", "device.unhealthy",
                           "job.reclaim-timed-out"}) {
    EXPECT_EQ(EventLogLevel(type), LogLevel::kWarn) << type;
  }
  for (const char* type :
       {"node.registered", "node.drained", "job.scheduled", "job.preempted", "job.succeeded",
        "job.failed", "job.cancelled", "queue.applied", "device.unfenced", "device.healthy"}) {
    EXPECT_EQ(EventLogLevel(type), LogLevel::kInfo) << type;
  }
  for (const char* type : {"job.submitted", "job.waiting", "job.started", "job.lease-renewed"}) {
    EXPECT_EQ(EventLogLevel(type), LogLevel::kDebug) << type;
  }
}

TEST(DecisionLogTest, OneLinePerEnabledEvent) {
  StoreBatch batch;
  auto event = [](const char* actor, const char* type, const char* subject, const char* reason) {
    StoredEvent e;
    e.actor = actor;
    e.type = type;
    e.subject = subject;
    e.reason = reason;
    return e;
  };
  batch.events.push_back(event("scheduler", "job.scheduled", "job/7", "placed on n1"));
  batch.events.push_back(event("user:ann", "job.submitted", "job/8", "submitted"));
  SetLogLevel(LogLevel::kInfo);
  auto lines = EventLogLines(batch);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].first, LogLevel::kInfo);
  EXPECT_EQ(lines[0].second, "job.scheduled job/7 by scheduler: placed on n1");
  SetLogLevel(LogLevel::kDebug);
  EXPECT_EQ(EventLogLines(batch).size(), 2u);
  SetLogLevel(LogLevel::kInfo);
}

}  // namespace
}  // namespace carve
