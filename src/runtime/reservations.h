// The applied reservations (reservation_config.h) as the scheduler sees them at one moment: the
// nodes each holds, the taints on those nodes, and what each job tolerates, holds or borrows.
//   ahead:  taint carve.io/reservation-ahead=NAME; tolerated by the holder's jobs and by jobs
//           whose max_runtime ends them before the start.
//   active: taint carve.io/reservation=NAME; tolerated by the holder's jobs and, when borrowable,
//           by other tenants' preemptible jobs (borrowers), which the holder's jobs may preempt.
#ifndef CARVE_RUNTIME_RESERVATIONS_H_
#define CARVE_RUNTIME_RESERVATIONS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/model/cluster.h"
#include "core/sched/request.h"
#include "runtime/labels.h"
#include "runtime/reservation_config.h"

namespace carve {

struct NodeRecord;

inline constexpr const char* kReservationAheadTaint = "carve.io/reservation-ahead";
inline constexpr const char* kReservationTaint = "carve.io/reservation";

class ReservationView {
 public:
  ReservationView(const std::vector<ReservationConfig>& all,
                  const std::map<std::string, NodeRecord>& nodes,
                  const std::vector<PoolSelector>& pools, int64_t now);

  bool empty() const { return live_.empty(); }
  // The reservations not yet over, by name.
  const std::vector<ReservationConfig>& live() const { return live_; }
  // The nodes `r` holds (of those registered), by name.
  std::vector<std::string> NodesOf(const ReservationConfig& r) const;
  // The taints of the reservations holding `node` (none ahead of or past them).
  std::vector<Taint> TaintsOf(const std::string& node) const;
  // The active reservation holding `node`, if any.
  const ReservationConfig* ActiveOn(const std::string& node) const;
  // Adds what a job of `tenant` in `queue` tolerates; `max_runtime_us` 0: no limit declared.
  void Tolerate(ReplicaRequest& replica, const std::string& tenant, const std::string& queue,
                bool preemptible, int64_t max_runtime_us) const;
  // The active reservations a job of `tenant` in `queue` holds.
  std::vector<std::string> Holds(const std::string& tenant, const std::string& queue) const;
  // The active reservation, not its own, on whose nodes a job on `nodes` runs ("": none).
  std::string Borrows(const std::string& tenant, const std::string& queue,
                      const std::vector<std::string>& nodes) const;

 private:
  int64_t now_;
  std::vector<ReservationConfig> live_;
  std::map<std::string, std::vector<size_t>> by_node_;  // node -> indexes into live_
};

// The taints that `all` put on the node `node` of pool `pool` at `now` (as
// ReservationView::TaintsOf, for one node).
std::vector<Taint> ReservationTaints(const std::vector<ReservationConfig>& all,
                                     const std::string& node, const std::string& pool, int64_t now);

// The reservations' taints on `cluster`'s nodes (key, value), with how many nodes carry each.
using ReservationTaintCounts = std::map<std::pair<std::string, std::string>, int>;
ReservationTaintCounts CountReservationTaints(const Cluster& cluster);

// The reservations whose taints (`counts`) keep `replica` off nodes, for explanations:
// "reservation launch (2 nodes)"; "" when none does. Those in `unnamed` (other tenants') are
// counted without their names: "2 nodes reserved for another tenant".
std::string ReservationsHoldingBack(const ReservationTaintCounts& counts,
                                    const std::set<std::string>& unnamed,
                                    const ReplicaRequest& replica);

}  // namespace carve

#endif  // CARVE_RUNTIME_RESERVATIONS_H_
