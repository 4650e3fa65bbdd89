#include "core/sched/placement/placer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {

std::string FitReport::Summary() const {
  std::vector<std::string> parts;
  int failed = 0;
  for (int i = 1; i < kFitReasonCount; ++i) {
    if (reasons[i] == 0) continue;
    failed += reasons[i];
    parts.push_back(absl::StrCat(reasons[i], " ", ToString(static_cast<FitReason>(i))));
  }
  return absl::StrCat(nodes_considered - failed, "/", nodes_considered, " nodes fit replica ",
                      replica, parts.empty() ? "" : ": ", absl::StrJoin(parts, ", "));
}

Placer::Placer(Cluster* cluster, const PlacementPolicy* policy, uint64_t seed, Strategy strategy)
    : cluster_(cluster), policy_(policy), rng_(seed) {
  if (strategy == Strategy::kIndexed && policy->indexable()) {
    index_ = std::make_unique<PlacementIndex>(cluster, policy);
  }
}

void Placer::SetNodeRanks(std::vector<int64_t> ranks) {
  ranks_ = std::move(ranks);
  if (index_) {
    index_ = std::make_unique<PlacementIndex>(cluster_, policy_);
    index_->SetRanks(&ranks_);
  }
}

void Placer::Invalidate(NodeId node) {
  if (index_) index_->NodeChanged(node);
}

void Placer::Apply(const ReplicaPlacement& placement) {
  ApplyReplica(*cluster_, placement);
  Allocated(placement.node);
}

void Placer::Allocated(NodeId node) {
  if (index_) index_->NodeChanged(node, PlacementIndex::Change::kAllocation);
}

PlaceResult Placer::Place(const JobRequest& job) {
  PlaceResult result;
  for (int r = 0; r < job.replicas; ++r) {
    Choice choice = PlaceReplica(job.replica, result.report);
    if (!choice.found) {
      result.report.replica = r;
      Release(result.replicas);
      result.replicas.clear();
      return result;
    }
    Apply(choice.placement);
    result.replicas.push_back(std::move(choice.placement));
  }
  result.placed = true;
  return result;
}

void Placer::Release(const std::vector<ReplicaPlacement>& replicas) {
  for (auto it = replicas.rbegin(); it != replicas.rend(); ++it) {
    ReleaseReplica(*cluster_, *it);
    Allocated(it->node);
  }
}

Placer::Choice Placer::PlaceReplica(const ReplicaRequest& replica, FitReport& report) {
  if (!index_) return ScanReplica(replica, report);
  std::optional<PlacementIndex::Pick> pick = index_->Best(replica, rng_);
  // No node fits: scan anyway, for the per-reason counts that explain why.
  if (!pick) return ScanReplica(replica, report);
  DeviceOptionList options = DeviceOptions(*cluster_, cluster_->node(pick->node), replica);
  return {true, ReplicaPlacement{pick->node, replica.resources, std::move(options[pick->option]),
                                 replica.app}};
}

Placer::Choice Placer::ScanReplica(const ReplicaRequest& replica, FitReport& report) {
  report = FitReport();
  feasible_.clear();
  scores_.clear();
  options_.clear();
  candidates_.clear();
  const std::vector<Node>& nodes = cluster_->nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    ++report.nodes_considered;
    FitReason reason = CheckNode(*cluster_, node, replica);
    ++report.reasons[static_cast<int>(reason)];
    if (reason != FitReason::kFits) continue;
    DeviceOptionList options = DeviceOptions(*cluster_, node, replica);
    if (options.empty()) continue;
    NodeId id(static_cast<int64_t>(i));
    Evaluation e = policy_->Evaluate(*cluster_, id, replica, options, rng_);
    feasible_.push_back(id.value());
    scores_.push_back(e.score);
    options_.push_back(e.option);
    candidates_.push_back(std::move(options));
  }
  if (feasible_.empty()) return {};
  policy_->Normalize(scores_);
  size_t pick = PickBest(scores_);
  return {true, ReplicaPlacement{NodeId(feasible_[pick]), replica.resources,
                                 std::move(candidates_[pick][options_[pick]]), replica.app}};
}

size_t Placer::PickBest(const std::vector<double>& scores) {
  size_t best = 0;
  int ties = 1;
  bool random = policy_->tie_break() == TieBreak::kRandom;
  for (size_t i = 1; i < scores.size(); ++i) {
    if (scores[i] > scores[best]) {
      best = i;
      ties = 1;
    } else if (scores[i] == scores[best]) {
      if (random) {
        // Reservoir sampling: each of the equal best is kept with probability 1/ties.
        if (std::uniform_int_distribution<int>(0, ties)(rng_) == 0) best = i;
        ++ties;
      } else if (Rank(feasible_[i]) < Rank(feasible_[best])) {
        best = i;
      }
    }
  }
  return best;
}

}  // namespace carve
