// The workload profile (`carve profile`, and a section of the acceptance report): what the work
// on a cluster looks like, per kind and queue, from the usage rows (one per attempt that held
// devices; docs/utilization.md). What Carve does not measure is listed, never estimated.
#ifndef CARVE_RUNTIME_PROFILE_H_
#define CARVE_RUNTIME_PROFILE_H_

#include <vector>

#include "nlohmann/json.hpp"

namespace carve {

// From usage rows: {"groups": [{kind, queue, jobs, attempts, wait_s: {p50, p95}, run_s: {p50,
// p95}, gpus_per_replica: {size: attempts}, modes: {mode: attempts}, models: {model: attempts},
// failed, failure_rate, preempted, preemption_rate, gpu_hours}], "rows", "definitions",
// "not_measured"}. Groups are ordered by kind, then queue.
nlohmann::json WorkloadProfile(const nlohmann::json& rows);

// The nearest-rank percentile `p` (0..1] of `values`; null when there are none.
nlohmann::json NearestRank(std::vector<double> values, double p);

}  // namespace carve

#endif  // CARVE_RUNTIME_PROFILE_H_
