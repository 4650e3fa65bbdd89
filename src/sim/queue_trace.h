#ifndef CARVE_SIM_QUEUE_TRACE_H_
#define CARVE_SIM_QUEUE_TRACE_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve::sim {

// `carve sim queues`: the trace's pods arrive at their creation time and run until their
// deletion time, in two tenants' queues of one cohort: latency-sensitive pods (qos LS) in
// "prod", the rest (Burstable, BE) in "research". Each queue's nominal quota is its share of the
// cluster's GPUs (whole GPUs and GPU shares alike); an idle queue lends its quota to the other,
// which gives it back by preemption when the owner needs it.
struct QueueTraceOptions {
  std::string nodes_path;
  std::string pods_path;
  double node_fraction = 0.1;
  // The trace's pods live hours but arrive over five months (about 14 GPUs busy on average):
  // arrivals come this many times faster, durations unchanged, so the queues contend.
  double arrival_speedup = 500;
  double prod_share = 0.5;  // prod's nominal share of the GPUs; research gets the rest
  int buckets = 12;         // report rows from the first arrival to the last
  std::string policy = "best-fit";
};

struct QueueShareRow {
  int64_t from_s = 0;
  int64_t to_s = 0;
  // Per queue (prod, research): time-weighted mean GPUs held, pending jobs at the end.
  double prod_gpus = 0;
  double research_gpus = 0;
  int prod_pending = 0;
  int research_pending = 0;
};

struct QueueTraceResult {
  int64_t nodes = 0;
  double gpus = 0;
  double prod_quota_gpus = 0;
  double research_quota_gpus = 0;
  int64_t prod_jobs = 0;
  int64_t research_jobs = 0;
  int64_t preemptions = 0;
  int64_t reclaims = 0;
  int cycles = 0;
  double prod_mean_wait_s = 0;
  double research_mean_wait_s = 0;
  int64_t never_started = 0;
  double seconds = 0;  // wall time of the simulation
  std::vector<QueueShareRow> rows;

  nlohmann::json ToJson() const;
  void PrintTable(std::ostream& out) const;
};

absl::StatusOr<QueueTraceResult> RunQueueTrace(const QueueTraceOptions& options);

}  // namespace carve::sim

#endif  // CARVE_SIM_QUEUE_TRACE_H_
