#ifndef CARVE_SIM_TRACE_H_
#define CARVE_SIM_TRACE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace carve::sim {

// Amounts of named extra resources (the optional `extra:<name>` columns), sorted by name.
using ExtraAmounts = std::vector<std::pair<std::string, int64_t>>;

// One row of an Alibaba cluster-trace-gpu-v2023 node list (sn,cpu_milli,memory_mib,gpu,model).
struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;  // empty for CPU-only nodes
  ExtraAmounts extra;
};

// One row of a pod list: the 11-column layout, or the 5-column multigpu* layout
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli).
struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int64_t gpu_milli = 0;              // per GPU; below 1000 only when num_gpu == 1
  std::vector<std::string> gpu_spec;  // allowed models; empty means any
  // The 11-column layout only: QoS class (LS, Burstable, BE) and lifetime in seconds.
  std::string qos;
  int64_t creation_s = 0;
  int64_t deletion_s = 0;
  // Optional columns (docs/placement.md, "Input format"): extra resources; the application
  // and the most of its pods on one node (0: no limit).
  ExtraAmounts extra;
  std::string app;
  int max_per_node = 0;
};

// Errors name the file and line ("pods.csv:17: gpu_milli: ...").
absl::StatusOr<std::vector<TraceNode>> ReadNodeList(const std::string& path);
absl::StatusOr<std::vector<TracePod>> ReadPodList(const std::string& path);

}  // namespace carve::sim

#endif  // CARVE_SIM_TRACE_H_
