#ifndef CARVE_CORE_SCHED_PLACEMENT_POLICIES_H_
#define CARVE_CORE_SCHED_PLACEMENT_POLICIES_H_

#include <memory>

#include "core/sched/placement/policy.h"

namespace carve {

// The baselines of the FGD paper, scored as its public simulator scores them (integer scores
// on 0..100, device choice best-fit unless stated):
std::unique_ptr<PlacementPolicy> MakeFirstFitPolicy();    // lowest node index that fits
std::unique_ptr<PlacementPolicy> MakeBestFitPolicy();     // least CPU and GPU left after
std::unique_ptr<PlacementPolicy> MakePackingPolicy();     // busy devices, then busy nodes
std::unique_ptr<PlacementPolicy> MakeClusteringPolicy();  // nodes running the same GPU kind
std::unique_ptr<PlacementPolicy> MakeDotProductPolicy();  // least aligned free and asked vectors
std::unique_ptr<PlacementPolicy> MakeRandomPolicy();      // uniform node, uniform device
// Fragmentation gradient descent: least growth of expected fragmentation (truncated sigmoid
// score, as the paper's simulator).
std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const Workload& workload);
// Carve's default; see carve_policy.cc.
std::unique_ptr<PlacementPolicy> MakeCarvePolicy(const Workload& workload);

// Free compute summed over a node's exclusive and shared devices, in milli-GPU.
int64_t FreeGpuMilli(const Node& node);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_POLICIES_H_
