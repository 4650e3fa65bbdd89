// The applied reservations (reservation_config.h) as the scheduler sees them at one moment: the
// nodes each holds, the taints on those nodes, and what each job tolerates, holds or borrows.
// A reservation of gpus holds devices, not nodes: the same taints go on each device it picked.
// It picks, in node-name and device order, devices of its model in the mode its count is in
// (exclusive for GPUs, partition for MIG instances, shared for shares), on nodes of its pool if
// it names one and not declared dead, that no reservation of nodes and no earlier reservation of
// gpus (by start, then name) holds at an overlapping time, until its count is covered: as long
// as the registered GPUs, their modes and the reservations stay the same, so do its devices (a
// device that fails is not replaced; it says so in `carve reservations`). When they change in
// its window, the new devices are enforced as at the start (`reservation.changed`).
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
#include "core/model/gpu_catalog.h"
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
                  const std::vector<PoolSelector>& pools, int64_t now, const GpuCatalog& catalog);

  bool empty() const { return live_.empty(); }
  // The reservations not yet over, by name.
  const std::vector<ReservationConfig>& live() const { return live_; }
  // The nodes `r` holds (of those registered), by name; for a reservation of gpus, the nodes of
  // the devices it picked.
  std::vector<std::string> NodesOf(const ReservationConfig& r) const;
  // Whether `r` holds device `gpu` (its index on the node) of `node`: every device of a node it
  // holds, or one it picked.
  bool HoldsDevice(const ReservationConfig& r, const std::string& node, int gpu) const;
  // How much of a reservation of gpus its devices cover, in its count's unit (GPUs, MIG
  // instances, milli-GPUs of shares), and how many devices it picked.
  struct Cover {
    int64_t asked = 0;
    int64_t covered = 0;
    int64_t devices = 0;
  };
  Cover CoverOf(const ReservationConfig& r) const;
  // The devices a reservation of gpus picked: "node/index" in order (empty for one of nodes).
  std::vector<std::string> DevicesOf(const ReservationConfig& r) const;
  // The taints of the reservations holding `node` whole (none ahead of or past them).
  std::vector<Taint> TaintsOf(const std::string& node) const;
  // The taints of the reservations of gpus holding device `gpu` of `node`.
  std::vector<Taint> DeviceTaintsOf(const std::string& node, int gpu) const;
  // `node` as the scheduler sees it: its record's node with the reservations' taints on it and
  // on its devices.
  Node Build(const GpuCatalog& catalog, const std::string& name, const NodeRecord& rec,
             const std::vector<PoolSelector>& pools) const;
  // The active reservation holding `node` whole, or device `gpu` of it (-1: the node whole
  // only), if any.
  const ReservationConfig* ActiveOn(const std::string& node, int gpu = -1) const;
  // Adds what a job of `tenant` in `queue` tolerates; `max_runtime_us` 0: no limit declared.
  void Tolerate(ReplicaRequest& replica, const std::string& tenant, const std::string& queue,
                bool preemptible, int64_t max_runtime_us) const;
  // The active reservations a job of `tenant` in `queue` holds.
  std::vector<std::string> Holds(const std::string& tenant, const std::string& queue) const;
  // The active reservation, not its own, whose nodes or devices a job on `used` (node, the
  // device indexes it holds there) runs on ("": none).
  std::string Borrows(const std::string& tenant, const std::string& queue,
                      const std::vector<std::pair<std::string, std::vector<int>>>& used) const;

 private:
  using DeviceKey = std::pair<std::string, int>;  // node, device index
  void PickDevices(const std::vector<ReservationConfig>& all,
                   const std::map<std::string, NodeRecord>& nodes,
                   const std::vector<PoolSelector>& pools, const GpuCatalog& catalog);

  int64_t now_;
  std::vector<ReservationConfig> live_;
  std::map<std::string, std::vector<size_t>> by_node_;  // node -> indexes into live_
  std::map<DeviceKey, std::vector<size_t>> by_device_;  // device -> indexes into live_
  std::map<std::string, Cover> covers_;                 // reservation of gpus -> its cover
};

// The reservations' taints on `cluster`'s nodes and devices (key, value): how many nodes carry
// each whole, and how many devices.
struct TaintCount {
  int nodes = 0;
  int devices = 0;
};
using ReservationTaintCounts = std::map<std::pair<std::string, std::string>, TaintCount>;
ReservationTaintCounts CountReservationTaints(const Cluster& cluster);

// The reservations whose taints (`counts`) keep `replica` off nodes or devices, for
// explanations: "reservation launch (2 nodes)", "reservation eval (4 GPUs)"; "" when none does.
// Those in `unnamed` (other tenants') are counted without their names: "2 nodes reserved for
// another tenant", "4 GPUs reserved for another tenant".
std::string ReservationsHoldingBack(const ReservationTaintCounts& counts,
                                    const std::set<std::string>& unnamed,
                                    const ReplicaRequest& replica);

}  // namespace carve

#endif  // CARVE_RUNTIME_RESERVATIONS_H_
