// `carve poc compare`: the same workload run under each delivery mode (whole GPUs, shares, MIG
// instances), one mode after the other, with probe jobs: makespan, throughput, waits, GPU-seconds
// held and each job's slowdown against a solo run of its kind in that mode, side by side.
#ifndef CARVE_RUNTIME_POC_POC_COMPARE_H_
#define CARVE_RUNTIME_POC_POC_COMPARE_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/api_client.h"
#include "runtime/poc/poc.h"

namespace carve::poc {

// One kind of job in the workload: `count` probes computing `seconds`, each needing `gpu` of a
// GPU (0.25: a quarter; 1: a whole one).
struct WorkloadJob {
  std::string name;
  int count = 1;
  int64_t seconds = 3;
  double gpu = 1.0;
};

// {"jobs": [{name, count, seconds, gpu}, ...]} (YAML or JSON); errors name the field.
absl::StatusOr<std::vector<WorkloadJob>> ParseWorkload(const nlohmann::json& doc);

// Runs `jobs` under each of `modes` (exclusive, shared, partition) against the cluster.
absl::StatusOr<nlohmann::json> Compare(ApiClient& api, const Options& options,
                                       const std::vector<WorkloadJob>& jobs,
                                       const std::vector<std::string>& modes,
                                       std::ostream& progress);

// One self-contained page: the table and charts of a comparison.
std::string RenderCompare(const nlohmann::json& result);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_COMPARE_H_
