#ifndef CARVE_RUNTIME_SCHEDULER_MEMORY_H_
#define CARVE_RUNTIME_SCHEDULER_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/model/cluster.h"
#include "core/sched/placement/fit.h"
#include "core/sched/queueing/jobs.h"
#include "core/sched/request.h"
#include "runtime/cycle_plan.h"

namespace carve {

// What the last scheduling cycle did, for metrics, tests and `carve explain`.
struct CycleStats {
  int64_t at_us = 0;
  // full: every active job was planned; incremental: only new or changed work, the rest stayed
  // parked (SchedulerMemory). `why` names what made a cycle full, or (incremental) "the
  // reservation passed on" when more parked jobs came back for it.
  bool full = true;
  std::string why;
  size_t planned = 0;    // pending jobs and replicas the core ordered and judged
  size_t parked = 0;     // waiting jobs left out: nothing was released since they were judged
  size_t explained = 0;  // new or changed explanations recorded (each a record and an event)
  // Whether it planned on the last cycle's cluster brought up to date (not rebuilt), and how
  // often since the start such a kept cluster was found to differ from the records (a bug).
  bool cluster_kept = false;
  int64_t cluster_drift = 0;
};

// Whether two jobs' holdings take the same pieces (node, device, slice, amount), in any order: a
// holding read back from a job's record compares equal to the placement it was bound with.
bool SameHoldings(const std::vector<ReplicaPlacement>& a, const std::vector<ReplicaPlacement>& b);
// Adds the nodes where `before` held something that `after` does not; whether there was any.
bool ReleasedNodes(const std::vector<ReplicaPlacement>& before,
                   const std::vector<ReplicaPlacement>& after, std::set<int64_t>& nodes);
// The first node whose holdings (free resources, per-device allocations and instances, in any
// order) differ between two clusters of the same nodes; empty when none does.
std::string HoldingsDiffer(const Cluster& a, const Cluster& b);

// What a cycle finds released since the last one: devices on these nodes (their indexes in the
// cluster), quota in these queues.
struct Released {
  std::set<int64_t> nodes;
  std::set<std::string> queues;
  bool empty() const { return nodes.empty() && queues.empty(); }
};

// What the scheduler remembers from one cycle to the next (Kueue's inadmissible workloads, in
// Carve's plan/apply). A waiting job whose verdict is settled (WaitExplanation::settled: it waits
// on quota, placement or its gang, and no victims make it fit) is parked: later cycles leave it
// out, with its explanation, until something it could use is released. Between two cycles, only
// releases give capacity back (binds and claims take it), so a parked job comes back when
//   - (a job that waited for room alone) a job released devices on a node where one replica of
//     its request fits now, and it is one of the first parked jobs of that request and max
//     runtime in its queue's order, as many as the released nodes take replicas of it (RoomFor;
//     in every queue, since any queue's jobs may come first across queues). Within one queue the
//     order is the core's (priority with aging, then submission), and a later job of the same
//     request and max runtime cannot start where an earlier one found no room, so the others
//     stay parked (ControlPlane::Unpark);
//   - (a job that waited for quota alone) quota came back to a queue of its cohort (Released).
//     A job that waited for both comes back when both were released; devices its request fits,
//     released without quota in its cohort, leave it parked (the quota still holds it), waiting
//     from then on for quota alone;
//   the cycle plans it with the new work;
//   - a node changed (registered, cordoned, uncordoned, a GPU quarantined or cleared), a running
//     job began stopping unclaimed (cancelled, lease expired: a job that fits once it is gone
//     claims its room before it is released), queues, projects or classes changed, a decision of
//     the last cycle was found stale, or the last full cycle is old: the cycle is full, every job
//     is planned.
// The job holding the backfill reservation is planned in every cycle, so new work respects it;
// so is the first parked job of each queue, request and max runtime that waits for room alone
// (or whose cohort got quota back): the reservation goes to the first job in order that is
// blocked on room, queue shares (the order across queues) move with every bind and release,
// and of the parked jobs only those heads can be that job.
// What a release cannot bring back: a parked job that would now fit by preempting jobs on the
// released node (it does not fit there as it is), or whose aged priority now outranks a running
// job; a full cycle at least every ControlPlane::Options::full_cycle_every_us, or ten times as
// long as the last full cycle took (so full cycles take at most a tenth of the scheduler's time),
// catches those. Owned by the scheduler (under ControlPlane::schedule_mu_).
struct SchedulerMemory {
  bool valid = false;   // false: the next cycle is full (first cycle, an error, a skipped decision)
  int64_t full_us = 0;  // when the last full cycle ended
  int64_t full_took_us = 0;  // and how long it took
  uint64_t config_revision = 0;
  std::optional<Cluster> base;  // the nodes as the last cycle saw them, without holdings
  // The cluster the last cycle planned on, with its binds, and what every placed job held then:
  // the next cycle, on the same nodes, reads again only the jobs changed since (their revision)
  // and applies the difference (ControlPlane::ReadHoldings), instead of every holding.
  std::optional<Cluster> cluster;
  Holdings held;
  // Parked jobs: the revision the verdict was made on, and the request it was made for.
  struct Parked {
    uint64_t revision = 0;
    size_t shape = 0;    // in shapes
    bool quota = false;  // its queue's quota held it back (a quota gate)
    bool room = false;   // no room for it in the cluster held it back (a placement or gang gate)
    // Its place in its queue's order (the core's, without the queue's share), and its max
    // runtime: what ControlPlane::Unpark orders and groups by, without looking the job up.
    std::string queue;
    int64_t priority = 0;
    int64_t submitted_us = 0;
    int64_t max_runtime_us = 0;
  };
  absl::flat_hash_map<int64_t, Parked> parked;
  std::vector<ReplicaRequest> shapes;
  absl::flat_hash_map<ReplicaRequest, size_t> shape_index;
  int64_t reserved_job = 0;
  // Running jobs told to stop (cancelled, drained, lease expired) that no preemptor claimed: a
  // waiting job that fits once one is gone claims its room in a full cycle (no later job takes
  // it meanwhile), so one that begins stopping makes the next cycle full.
  std::set<int64_t> stopping;
  // Set when an incremental cycle passed the reservation on (its holder started or left): the
  // next cycle says so (CycleStats::why), or, with ControlPlane::Options::unpark_by_room off,
  // is full.
  bool reservation_moved = false;

  // Why the cycle about to run must plan every job, given what it sees now; empty when it may
  // plan only new or changed work and the parked jobs that `released` lets back in.
  // (ControlPlane::ReadHoldings found what was released.)
  std::string FullCycleReason(int64_t now, int64_t every_us, uint64_t config_revision,
                              bool nodes_changed, const std::set<int64_t>& stopping) const;
  // Whether the last full cycle is old enough that the next must be full.
  bool FullDue(int64_t now, int64_t every_us) const;
  // For each parked shape that fits, in `cluster` as it is now, on a released node: how many of
  // its replicas the released nodes take together, placed one after another (then taken back:
  // `cluster` is left as it was), counted up to `limit`. No more jobs of that shape than this
  // can start on what was released.
  std::map<size_t, int> RoomFor(Cluster& cluster, const Released& released, int limit) const;
  // Parks `job`, judged at `revision`, held back by quota, room or both.
  void Park(const PendingJob& job, uint64_t revision, bool quota, bool room);
};

}  // namespace carve

#endif  // CARVE_RUNTIME_SCHEDULER_MEMORY_H_
