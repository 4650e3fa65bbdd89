// What the software tests share: probe jobs on shared GPUs, where they landed, their solo rate.
#ifndef CARVE_RUNTIME_POC_POC_PROBE_JOBS_H_
#define CARVE_RUNTIME_POC_POC_PROBE_JOBS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/poc/poc_cluster.h"

namespace carve::poc {

// A share of one GPU and the CPU and memory beside it.
struct Share {
  int compute_pct = 50;
  int64_t gpu_memory_mib = 1024;
  int64_t cpu_milli = 100;
  int64_t memory_mib = 512;
};

// `carve probe ARGS` as a job's command, with the kit's probe binary.
nlohmann::json ProbeCommand(const Options& options, const std::vector<std::string>& args);

// A job running `carve probe ARGS` on a share of a GPU of `model`. Best-effort isolation, so it
// runs on a GPU whose share is not enforced too, and the test can say so.
nlohmann::json ProbeSpec(const Options& options, const std::string& model, const std::string& name,
                         const Share& share, const std::vector<std::string>& args);

// A job running `carve probe ARGS` on `gpus` whole GPUs (of `model`, when given).
nlohmann::json WholeGpuSpec(const Options& options, const std::string& name,
                            const std::string& model, int gpus,
                            const std::vector<std::string>& args);

// Ready, uncordoned nodes with healthy exclusive GPUs: per node, per model, how many; and
// whether the node runs nothing.
struct WholeGpuNode {
  std::string node;
  std::string model;
  int count = 0;
  bool idle = true;
};
std::vector<WholeGpuNode> WholeGpuNodes(const nlohmann::json& nodes);

// Where replica `replica` of `job` ran: "node/gpu N" ("" when it never had a device).
std::string PlacementOf(const nlohmann::json& job, size_t replica = 0);

// The shared GPUs to test on. An empty list marks the record inconclusive.
absl::StatusOr<std::vector<SharedGpu>> FindSharedGpus(Cluster& cluster, Record& record);

// The probe's mean compute rate running alone with `share` for the kit's seconds.
absl::StatusOr<int64_t> SoloRate(Cluster& cluster, Record& record, const std::string& model,
                                 const Share& share);

// A bar chart for the report: {title, labels, series: [{label, values}]}.
nlohmann::json Chart(const std::string& title, const std::vector<std::string>& labels,
                     const std::string& series, const std::vector<double>& values);

// A number as the record writes it.
std::string Text(const nlohmann::json& j);
// Whole GiB of `fraction` of `mib`, at least 1, in MiB.
int64_t GiBOf(int64_t mib, int64_t divisor);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_PROBE_JOBS_H_
