#ifndef CARVE_SIM_WORKLOAD_H_
#define CARVE_SIM_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"
#include "core/sched/request.h"
#include "sim/trace.h"

namespace carve::sim {

// Trace nodes as Carve nodes: every GPU in shared mode (the trace mixes shares and whole GPUs
// on the same devices).
absl::StatusOr<std::vector<Node>> NodesFromTrace(const std::vector<TraceNode>& nodes,
                                                 const GpuCatalog& catalog);

// A trace pod as one replica: CPU-only, a share of one GPU, or whole GPUs.
absl::StatusOr<JobRequest> RequestFromPod(const TracePod& pod, const GpuCatalog& catalog);

// The observed workload for fgd and carve: pods grouped by (CPU, per-GPU milli, GPU count,
// allowed models), weighted by frequency, most frequent first with the FGD simulator's tie order
// (larger CPU, milli, count, spec first). fgd keeps the classes that cover 95% of the pods
// (its "typical pods", see TypicalClasses); carve uses them all.
absl::StatusOr<Workload> ObservedWorkload(const std::vector<TracePod>& pods,
                                          const GpuCatalog& catalog);

// Uniform integer in [0, n) by rejection sampling: the same sequence on every platform.
uint64_t UniformIndex(std::mt19937_64& rng, uint64_t n);

}  // namespace carve::sim

#endif  // CARVE_SIM_WORKLOAD_H_
