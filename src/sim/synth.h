#ifndef CARVE_SIM_SYNTH_H_
#define CARVE_SIM_SYNTH_H_

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"
#include "core/sched/request.h"
#include "nlohmann/json.hpp"

namespace carve::sim {

// `carve sim synth`: a synthetic cluster of mixed models and delivery modes (exclusive H200 and
// H100, shared L40S and A10, A100-80GB in dynamic MIG) and a job stream shaped like the Alibaba
// trace (CPU-only, fractional shares with memory caps, whole and multi-GPU, MIG partitions).
// Jobs arrive on a virtual clock and run for exponentially distributed times sized so the
// cluster settles near `target_load`; the run measures how fast the core places them.
struct SynthOptions {
  int nodes = 5000;
  int gpus_per_node = 8;
  int jobs = 50000;
  std::string policy = "carve";
  uint64_t seed = 42;
  double target_load = 0.9;
  bool scan = false;  // score every node (the index off), for comparison
};

struct SynthResult {
  std::string policy;
  int nodes = 0;
  int64_t gpus_total = 0;
  int64_t jobs = 0;
  int64_t placed = 0;
  int64_t failed = 0;
  double mean_alloc_pct = 0;  // GPU milli allocated / total, averaged over arrivals
  double place_seconds = 0;
  double placements_per_sec = 0;
  double release_seconds = 0;

  nlohmann::json ToJson() const;
  void Print(std::ostream& out) const;
};

absl::StatusOr<SynthResult> RunSynth(const SynthOptions& options);

// The pieces of the synthetic experiment, for benchmarks.
std::vector<Node> SyntheticNodes(int nodes, int gpus_per_node, const GpuCatalog& catalog,
                                 std::mt19937_64& rng);
JobRequest SyntheticJob(const GpuCatalog& catalog, std::mt19937_64& rng);
// Workload weights of `jobs`' distinct requests, by frequency.
Workload WorkloadOf(const std::vector<JobRequest>& jobs);

}  // namespace carve::sim

#endif  // CARVE_SIM_SYNTH_H_
