#include "runtime/reservations.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/records.h"

namespace carve {

ReservationView::ReservationView(const std::vector<ReservationConfig>& all,
                                 const std::map<std::string, NodeRecord>& nodes,
                                 const std::vector<PoolSelector>& pools, int64_t now)
    : now_(now) {
  for (const ReservationConfig& r : all) {
    if (r.PhaseAt(now) != ReservationConfig::Phase::kOver) live_.push_back(r);
  }
  if (live_.empty()) return;
  for (const auto& [name, rec] : nodes) {
    const std::string pool = PoolOf(rec.labels, pools);
    for (size_t i = 0; i < live_.size(); ++i) {
      if (live_[i].Covers(name, pool)) by_node_[name].push_back(i);
    }
  }
}

std::vector<std::string> ReservationView::NodesOf(const ReservationConfig& r) const {
  std::vector<std::string> out;
  for (const auto& [node, held] : by_node_) {
    for (size_t i : held) {
      if (live_[i].name == r.name) out.push_back(node);
    }
  }
  return out;
}

namespace {

Taint TaintOf(const ReservationConfig& r, int64_t now) {
  const bool active = r.PhaseAt(now) == ReservationConfig::Phase::kActive;
  return {active ? kReservationTaint : kReservationAheadTaint, r.name};
}

}  // namespace

std::vector<Taint> ReservationView::TaintsOf(const std::string& node) const {
  std::vector<Taint> out;
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return out;
  for (size_t i : it->second) out.push_back(TaintOf(live_[i], now_));
  return out;
}

std::vector<Taint> ReservationTaints(const std::vector<ReservationConfig>& all,
                                     const std::string& node, const std::string& pool,
                                     int64_t now) {
  std::vector<Taint> out;
  for (const ReservationConfig& r : all) {
    if (r.PhaseAt(now) != ReservationConfig::Phase::kOver && r.Covers(node, pool)) {
      out.push_back(TaintOf(r, now));
    }
  }
  return out;
}

const ReservationConfig* ReservationView::ActiveOn(const std::string& node) const {
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return nullptr;
  for (size_t i : it->second) {
    if (live_[i].PhaseAt(now_) == ReservationConfig::Phase::kActive) return &live_[i];
  }
  return nullptr;
}

void ReservationView::Tolerate(ReplicaRequest& replica, const std::string& tenant,
                               const std::string& queue, bool preemptible,
                               int64_t max_runtime_us) const {
  for (const ReservationConfig& r : live_) {
    const bool holder = r.HeldBy(tenant, queue);
    if (r.PhaseAt(now_) == ReservationConfig::Phase::kActive) {
      // Others only as borrowers: preemptible, so the holder's jobs can take the room back.
      if (holder || (r.borrowable && preemptible)) {
        replica.tolerations.push_back({kReservationTaint, r.name});
      }
    } else if (holder || (max_runtime_us > 0 && now_ + max_runtime_us <= r.start_us)) {
      replica.tolerations.push_back({kReservationAheadTaint, r.name});
    }
  }
}

std::vector<std::string> ReservationView::Holds(const std::string& tenant,
                                                const std::string& queue) const {
  std::vector<std::string> out;
  for (const ReservationConfig& r : live_) {
    if (r.PhaseAt(now_) == ReservationConfig::Phase::kActive && r.HeldBy(tenant, queue)) {
      out.push_back(r.name);
    }
  }
  return out;
}

std::string ReservationView::Borrows(const std::string& tenant, const std::string& queue,
                                     const std::vector<std::string>& nodes) const {
  for (const std::string& node : nodes) {
    const ReservationConfig* r = ActiveOn(node);
    if (r != nullptr && !r->HeldBy(tenant, queue)) return r->name;
  }
  return "";
}

ReservationTaintCounts CountReservationTaints(const Cluster& cluster) {
  ReservationTaintCounts counts;
  for (const Node& n : cluster.nodes()) {
    for (const Taint& t : n.taints) {
      if (t.key == kReservationTaint || t.key == kReservationAheadTaint) ++counts[{t.key, t.value}];
    }
  }
  return counts;
}

std::string ReservationsHoldingBack(const ReservationTaintCounts& counts,
                                    const std::set<std::string>& unnamed,
                                    const ReplicaRequest& replica) {
  std::map<std::string, int> held;  // reservation -> nodes it keeps the replica off
  for (const auto& [taint, count] : counts) {
    const Taint t{taint.first, taint.second};
    if (std::find(replica.tolerations.begin(), replica.tolerations.end(), t) ==
        replica.tolerations.end()) {
      held[t.value] += count;
    }
  }
  std::vector<std::string> parts;
  int others = 0;
  for (const auto& [name, count] : held) {
    if (unnamed.count(name)) {
      others += count;
      continue;
    }
    parts.push_back(
        absl::StrCat("reservation ", name, " (", count, count == 1 ? " node)" : " nodes)"));
  }
  if (others > 0) {
    parts.push_back(
        absl::StrCat(others, others == 1 ? " node" : " nodes", " reserved for another tenant"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace carve
