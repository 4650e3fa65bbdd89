#include "core/sched/queueing/order.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace carve {

std::vector<PriorityClass> BuiltInPriorityClasses() {
  return {{"critical", 1000, false}, {"standard", 100, true}, {"exploratory", 0, true}};
}

int64_t EffectivePriority(int64_t priority, int64_t submitted_us, int64_t now_us,
                          const AgingOptions& aging) {
  if (aging.interval_us <= 0 || now_us <= submitted_us) return priority;
  return priority + (now_us - submitted_us) / aging.interval_us * aging.step;
}

bool Before(const OrderKey& a, const OrderKey& b) {
  if ((a.nominated_us != 0) != (b.nominated_us != 0)) return a.nominated_us != 0;
  if (a.nominated_us != b.nominated_us) return a.nominated_us < b.nominated_us;
  if (a.effective_priority != b.effective_priority) {
    return a.effective_priority > b.effective_priority;
  }
  if (a.share != b.share) return a.share < b.share;
  if (a.submitted_us != b.submitted_us) return a.submitted_us < b.submitted_us;
  return a.id < b.id;
}

std::string WhyBefore(const OrderKey& a, const OrderKey& b) {
  if (a.nominated_us != b.nominated_us) return "it preempted jobs to start and goes first";
  if (a.effective_priority != b.effective_priority) {
    return absl::StrFormat("priority %d > %d", a.effective_priority, b.effective_priority);
  }
  if (a.share != b.share) return absl::StrFormat("queue share %.3f < %.3f", a.share, b.share);
  if (a.submitted_us != b.submitted_us) return "submitted earlier";
  return "lower id";
}

}  // namespace carve
