#ifndef CARVE_CORE_SCHED_PLACEMENT_POLICY_H_
#define CARVE_CORE_SCHED_PLACEMENT_POLICY_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model/cluster.h"
#include "core/sched/placement/fit.h"
#include "core/sched/request.h"

namespace carve {

// The shape of the work a cluster expects, for policies that plan against it (fgd, carve):
// request kinds with their share of the workload.
struct WorkloadClass {
  ReplicaRequest request;
  double weight = 0;  // popularity; weights sum to 1
};
using Workload = std::vector<WorkloadClass>;

// How the placer chooses among nodes that share the best score.
enum class TieBreak : uint8_t {
  kRandom,     // uniformly at random from the placer's seeded generator
  kNodeOrder,  // the placer's node order: index order unless the caller sets a ranking
};

// The device options of one node for one replica, as DeviceOptions returns them.
using DeviceOptionList = std::vector<std::vector<DeviceGrant>>;

// A policy's verdict on one node: its score (higher is better) and which device option to use.
struct Evaluation {
  double score = 0;
  size_t option = 0;
};

// A placement policy scores a node that passed every filter and picks one of its device options.
// Scores of different nodes are compared after Normalize(), which sees every feasible node's
// score for this replica. Policies hold no placement state; `rng` is the placer's seeded
// generator. A policy may keep a memo of pure computations, so use one instance per placer.
class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual absl::string_view name() const = 0;
  virtual Evaluation Evaluate(const Cluster& cluster, NodeId id, const ReplicaRequest& replica,
                              const DeviceOptionList& options, std::mt19937_64& rng) const = 0;
  virtual void Normalize(std::vector<double>& scores) const { (void)scores; }
  virtual TieBreak tie_break() const { return TieBreak::kNodeOrder; }
  // True when Evaluate is a pure function of (node state, node id, request), Normalize keeps
  // the order of scores and ties go by node order: the placer may then keep an index of
  // scored nodes per request instead of scoring every node for every replica.
  virtual bool indexable() const { return tie_break() == TieBreak::kNodeOrder; }
};

// Best-fit device choice: for a share, the device with the least free compute that still fits
// (lowest index on ties); otherwise the first option (the lowest-index free devices).
size_t BestFitOption(const Node& node, const DeviceOptionList& options);

struct PolicyOptions {
  Workload workload;  // for fgd and carve; empty means "derive from what was placed so far"
};

// first-fit, best-fit, packing, clustering, dot-product, random, fgd, carve.
std::vector<std::string> PolicyNames();
absl::StatusOr<std::unique_ptr<PlacementPolicy>> MakePolicy(absl::string_view name,
                                                            const PolicyOptions& options);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_POLICY_H_
