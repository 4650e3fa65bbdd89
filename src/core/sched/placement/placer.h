#ifndef CARVE_CORE_SCHED_PLACEMENT_PLACER_H_
#define CARVE_CORE_SCHED_PLACEMENT_PLACER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/model/cluster.h"
#include "core/sched/placement/fit.h"
#include "core/sched/placement/placement_index.h"
#include "core/sched/placement/policy.h"
#include "core/sched/request.h"

namespace carve {

// Why a job did not fit: for the first replica that found no node, how many nodes failed each
// filter (FitReason), over all nodes considered.
struct FitReport {
  int replica = -1;
  int nodes_considered = 0;
  std::array<int, kFitReasonCount> reasons{};

  // "0/1213 nodes fit replica 0: 900 insufficient-whole-gpus, 313 gpu-model-not-allowed".
  std::string Summary() const;
};

struct PlaceResult {
  bool placed = false;
  std::vector<ReplicaPlacement> replicas;  // one per replica when placed
  FitReport report;
};

// Places jobs onto a cluster with one policy: all replicas of a job or none. Owns no state
// but its caches and a seeded generator, so the same inputs give the same placements.
// Not thread-safe; one placer per cluster. All changes to the cluster's allocations must go
// through Place/Release (or be followed by Invalidate) so the caches stay true.
class Placer {
 public:
  // kIndexed keeps a PlacementIndex when the policy is indexable (same answers, faster when
  // requests repeat); kScan scores every node for every replica.
  enum class Strategy : uint8_t { kScan, kIndexed };
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;
  Placer(Cluster* cluster, const PlacementPolicy* policy, uint64_t seed,
         Strategy strategy = Strategy::kIndexed);

  // Places every replica and applies the result to the cluster; on failure the cluster is
  // unchanged and the report says why.
  PlaceResult Place(const JobRequest& job);
  // Gives back exactly what Place took.
  void Release(const std::vector<ReplicaPlacement>& replicas);
  // Ties under TieBreak::kNodeOrder go to the lowest rank (default: the node index).
  // REQUIRES: one distinct rank per node.
  void SetNodeRanks(std::vector<int64_t> ranks);
  // The node's state, health, labels or taints changed outside Place/Release.
  void Invalidate(NodeId node);
  // Applies a placement made elsewhere (a claim, a replica already running) to the cluster.
  void Apply(const ReplicaPlacement& placement);

 private:
  struct Choice {
    bool found = false;
    ReplicaPlacement placement;
  };
  Choice PlaceReplica(const ReplicaRequest& replica, FitReport& report);
  Choice ScanReplica(const ReplicaRequest& replica, FitReport& report);
  size_t PickBest(const std::vector<double>& scores);
  void Allocated(NodeId node);  // only the node's allocations changed
  int64_t Rank(int64_t node) const { return ranks_.empty() ? node : ranks_[node]; }

  Cluster* cluster_;
  const PlacementPolicy* policy_;
  std::mt19937_64 rng_;
  std::vector<int64_t> ranks_;
  std::unique_ptr<PlacementIndex> index_;  // null when scanning
  // Scratch space reused across calls.
  std::vector<int64_t> feasible_;
  std::vector<double> scores_;
  std::vector<size_t> options_;
  std::vector<DeviceOptionList> candidates_;
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_PLACER_H_
