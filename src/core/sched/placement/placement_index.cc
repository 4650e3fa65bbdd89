#include "core/sched/placement/placement_index.h"

#include <algorithm>

#include "core/sched/placement/fit.h"

namespace carve {

PlacementIndex::PlacementIndex(const Cluster* cluster, const PlacementPolicy* policy)
    : cluster_(cluster), policy_(policy) {}

void PlacementIndex::NodeChanged(NodeId id, Change change) {
  if (requests_.empty()) return;
  log_.push_back(id.value() * 2 + (change == Change::kAllocation));
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
  index->score.assign(n, 0);
  index->version.assign(n, 0);
  index->present.assign(n, 0);
  index->option.assign(n, 0);
  index->ruled_out.assign(n, 0);
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
  FitReason reason = CheckNode(*cluster_, n, index.request);
  index.ruled_out[node] = RuledOut(n, index.request, reason);
  if (reason == FitReason::kFits) {
    DeviceOptionList options = DeviceOptions(*cluster_, n, index.request);
    if (!options.empty()) e = policy_->Evaluate(*cluster_, id, index.request, options, rng);
  }
  if (index.present[node] && e && index.score[node] == e->score) {  // same place in the order
    index.option[node] = static_cast<uint32_t>(e->option);
    return;
  }
  ++index.version[node];
  index.present[node] = e.has_value();
  if (!e) return;
  index.score[node] = e->score;
  index.option[node] = static_cast<uint32_t>(e->option);
  index.heap.push_back({e->score, Rank(node), node, index.version[node]});
  std::push_heap(index.heap.begin(), index.heap.end());
  if (index.heap.size() > 2 * index.present.size() + 1024) {  // mostly stale: rebuild
    std::erase_if(index.heap, [&](const Entry& x) { return !index.Valid(x); });
    std::make_heap(index.heap.begin(), index.heap.end());
  }
}

void PlacementIndex::Sync(RequestIndex& index, std::mt19937_64& rng) {
  if (stamp_.size() < cluster_->size()) stamp_.resize(cluster_->size(), 0);
  ++pass_;
  for (size_t i = index.synced; i < log_.size(); ++i) {
    int64_t node = log_[i] / 2;
    bool allocation = log_[i] % 2 == 1;
    if (stamp_[node] == pass_ || (allocation && index.ruled_out[node])) continue;
    stamp_[node] = pass_;
    Rescore(index, node, rng);
  }
  index.synced = log_.size();
}

std::optional<PlacementIndex::Pick> PlacementIndex::Best(const ReplicaRequest& replica,
                                                         std::mt19937_64& rng) {
  RequestIndex& index = IndexFor(replica, rng);
  while (!index.heap.empty() && !index.Valid(index.heap.front())) {
    std::pop_heap(index.heap.begin(), index.heap.end());
    index.heap.pop_back();
  }
  if (index.heap.empty()) return std::nullopt;
  const Entry& top = index.heap.front();
  return Pick{NodeId(top.node), index.option[top.node]};
}

}  // namespace carve
