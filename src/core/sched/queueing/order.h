#ifndef CARVE_CORE_SCHED_QUEUEING_ORDER_H_
#define CARVE_CORE_SCHED_QUEUEING_ORDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace carve {

// A priority class; the three risk tiers are built in and may be redefined by configuration.
struct PriorityClass {
  std::string name;
  int64_t priority = 0;
  bool preemptible = true;
};

// critical (1000, not preemptible), standard (100, preemptible), exploratory (0, preemptible).
std::vector<PriorityClass> BuiltInPriorityClasses();

// Aging: a pending job gains `step` priority points per `interval_us` it has waited, so any job
// eventually outranks every newcomer of a bounded priority (no starvation). Aging only orders the
// queue; preemption compares base priorities, so an old job never evicts by age alone.
struct AgingOptions {
  int64_t interval_us = 60'000'000;
  int64_t step = 1;
};

int64_t EffectivePriority(int64_t priority, int64_t submitted_us, int64_t now_us,
                          const AgingOptions& aging);

// The position of one pending job in the scheduling order. The order is total: nominated
// first (earliest nomination first), then effective priority (higher first), then the weighted
// dominant share of its queue (lower first), then submission time (earlier first), then id (lower
// first).
struct OrderKey {
  // When it preempted jobs in an earlier cycle to start (0: it did not). Such jobs go first, in
  // the order they preempted, so what their victims release is theirs (as a nominated pod in
  // Kubernetes): a preemption makes its preemptor fit, never another job.
  int64_t nominated_us = 0;
  int64_t effective_priority = 0;
  double share = 0;
  int64_t submitted_us = 0;
  int64_t id = 0;
};

bool Before(const OrderKey& a, const OrderKey& b);
// Why `a` goes before `b`, in words: "priority 1000 > 100", "queue share 0.10 < 0.35",
// "submitted earlier", "lower id".
std::string WhyBefore(const OrderKey& a, const OrderKey& b);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_ORDER_H_
