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

// The expected workload for fgd and carve, the way the FGD paper derives its "typical pods":
// group pods by (CPU, per-GPU milli, GPU count, allowed models), most frequent first, and keep
// the top groups until they cover 95% of the pods; weights are their shares of what was kept.
absl::StatusOr<Workload> TypicalWorkload(const std::vector<TracePod>& pods,
                                         const GpuCatalog& catalog, double coverage = 0.95);

// Uniform integer in [0, n) by rejection sampling: the same sequence on every platform.
uint64_t UniformIndex(std::mt19937_64& rng, uint64_t n);

}  // namespace carve::sim

#endif  // CARVE_SIM_WORKLOAD_H_
