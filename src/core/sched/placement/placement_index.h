#ifndef CARVE_CORE_SCHED_PLACEMENT_PLACEMENT_INDEX_H_
#define CARVE_CORE_SCHED_PLACEMENT_PLACEMENT_INDEX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"
#include "core/sched/request.h"

namespace carve {

// For each distinct replica request seen, the nodes that fit it ordered by (score, rank), kept
// current lazily: a changed node is re-scored for a request only when that request is next
// placed. A placement then costs O(changes since the request was last placed * log nodes)
// instead of scoring every node. Gives exactly the scan's answer for policies whose score is a
// pure function of (node, request) and whose Normalize keeps order (PlacementPolicy::indexable).
class PlacementIndex {
 public:
  PlacementIndex(const Cluster* cluster, const PlacementPolicy* policy);

  // Ties go to the lowest rank; `ranks` is indexed by node and must hold distinct values.
  void SetRanks(const std::vector<int64_t>* ranks) { ranks_ = ranks; }
  // The node's state, labels, taints or devices changed (kAny), or only its allocations: a
  // replica placed or released (kAllocation), which cannot make a node RuledOut for a request
  // fit it, so such nodes are not re-scored.
  enum class Change : uint8_t { kAny, kAllocation };
  void NodeChanged(NodeId id, Change change = Change::kAny);

  struct Pick {
    NodeId node;
    size_t option = 0;
  };
  std::optional<Pick> Best(const ReplicaRequest& replica, std::mt19937_64& rng);

 private:
  // A node's place in the order: a max-heap of entries, each valid while its node's version is
  // the one it was pushed with (a re-score pushes a new entry; stale ones are dropped when they
  // reach the top, and the heap is rebuilt when they outnumber the nodes).
  struct Entry {
    double score;
    int64_t rank;
    int64_t node;
    uint32_t version;
    // Heap order: a lower score, then a higher rank, comes later.
    bool operator<(const Entry& o) const {
      if (score != o.score) return score < o.score;
      return rank > o.rank;
    }
  };
  struct RequestIndex {
    ReplicaRequest request;
    std::vector<Entry> heap;
    std::vector<double> score;      // node -> its score while present
    std::vector<uint32_t> version;  // node -> the version of its valid entry
    std::vector<char> present;
    std::vector<char> ruled_out;  // node -> RuledOut at its last re-score
    std::vector<uint32_t> option;
    size_t synced = 0;  // log position this index has caught up with
    bool Valid(const Entry& e) const { return present[e.node] && version[e.node] == e.version; }
  };

  int64_t Rank(int64_t node) const { return ranks_ ? (*ranks_)[node] : node; }
  RequestIndex& IndexFor(const ReplicaRequest& replica, std::mt19937_64& rng);
  void Rescore(RequestIndex& index, int64_t node, std::mt19937_64& rng);
  void Sync(RequestIndex& index, std::mt19937_64& rng);

  static constexpr size_t kMaxRequests = 256;
  static constexpr size_t kMaxLog = 1 << 20;

  const Cluster* cluster_;
  const PlacementPolicy* policy_;
  const std::vector<int64_t>* ranks_ = nullptr;
  absl::flat_hash_map<ReplicaRequest, std::unique_ptr<RequestIndex>> requests_;
  std::vector<int64_t> log_;     // nodes changed, in order: node * 2 + (allocation only)
  std::vector<uint64_t> stamp_;  // per node: the sync pass that last re-scored it
  uint64_t pass_ = 0;
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_PLACEMENT_INDEX_H_
