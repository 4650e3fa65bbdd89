#include "core/sched/placement/placement_index.h"

#include "core/sched/placement/fit.h"

namespace carve {

PlacementIndex::PlacementIndex(const Cluster* cluster, const PlacementPolicy* policy)
    : cluster_(cluster), policy_(policy) {}

void PlacementIndex::NodeChanged(NodeId id) {
  if (requests_.empty()) return;
  log_.push_back(id.value());
  if (log_.size() < kMaxLog) return;
  // Bound the log: forget every index; each rebuilds on its next use.
  requests_.clear();
  log_.clear();
}

PlacementIndex::RequestIndex& PlacementIndex::IndexFor(const ReplicaRequest& replica,
                                                       std::mt19937_64& rng) {
  auto it = requests_.find(replica);
  if (it != requests_.end()) {
    Sync(*it->second, rng);
    return *it->second;
  }
  if (requests_.size() >= kMaxRequests) {
    requests_.clear();
    log_.clear();
  }
  auto index = std::make_unique<RequestIndex>();
  index->request = replica;
  size_t n = cluster_->size();
  index->where.resize(n);
  index->present.assign(n, 0);
  index->option.assign(n, 0);
  index->synced = log_.size();
  for (size_t i = 0; i < n; ++i) Rescore(*index, static_cast<int64_t>(i), rng);
  RequestIndex& ref = *index;
  requests_.emplace(replica, std::move(index));
  return ref;
}

void PlacementIndex::Rescore(RequestIndex& index, int64_t node, std::mt19937_64& rng) {
  NodeId id(node);
  const Node& n = cluster_->node(id);
  std::optional<Evaluation> e;
  if (CheckNode(*cluster_, n, index.request) == FitReason::kFits) {
    DeviceOptionList options = DeviceOptions(*cluster_, n, index.request);
    if (!options.empty()) e = policy_->Evaluate(*cluster_, id, index.request, options, rng);
  }
  const Entry entry{e ? e->score : 0, Rank(node), node};
  if (index.present[node]) {
    if (e && index.where[node]->score == entry.score) {  // same place in the order
      index.option[node] = static_cast<uint32_t>(e->option);
      return;
    }
    index.order.erase(index.where[node]);
    index.present[node] = 0;
  }
  if (!e) return;
  index.where[node] = index.order.insert(entry).first;
  index.present[node] = 1;
  index.option[node] = static_cast<uint32_t>(e->option);
}

void PlacementIndex::Sync(RequestIndex& index, std::mt19937_64& rng) {
  if (stamp_.size() < cluster_->size()) stamp_.resize(cluster_->size(), 0);
  ++pass_;
  for (size_t i = index.synced; i < log_.size(); ++i) {
    int64_t node = log_[i];
    if (stamp_[node] == pass_) continue;
    stamp_[node] = pass_;
    Rescore(index, node, rng);
  }
  index.synced = log_.size();
}

std::optional<PlacementIndex::Pick> PlacementIndex::Best(const ReplicaRequest& replica,
                                                         std::mt19937_64& rng) {
  RequestIndex& index = IndexFor(replica, rng);
  if (index.order.empty()) return std::nullopt;
  const Entry& top = *index.order.begin();
  return Pick{NodeId(top.node), index.option[top.node]};
}

}  // namespace carve
