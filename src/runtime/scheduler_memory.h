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

namespace carve {

// What the last scheduling cycle did, for metrics, tests and `carve explain`.
struct CycleStats {
  int64_t at_us = 0;
  // full: every active job was planned; incremental: only new or changed work, the rest stayed
  // parked (SchedulerMemory). `why` names what made a cycle full.
  bool full = true;
  std::string why;
  size_t planned = 0;  // pending jobs and replicas the core ordered and judged
  size_t parked = 0;   // waiting jobs left out: nothing was released since they were judged
};

// What the scheduler remembers from one cycle to the next (Kueue's inadmissible workloads, in
// Carve's plan/apply): a waiting job whose verdict is settled (WaitExplanation::settled: it waits
// on quota, placement or its gang, and no victims make it fit) keeps that verdict until something
// is released. So a cycle in which nothing was released, no node changed, no rule changed and the
// last full cycle is recent plans only new or changed jobs (and the job holding the backfill
// reservation, so that new work still respects it); the parked ones keep their explanations.
// Capacity within such a window only shrinks (binds, claims), so a parked job could not fit,
// pass its quota or find victims in it either. Time alone (aging, windows, reservation
// estimates) is caught by a full cycle at least every ControlPlane::Options::full_cycle_every_us,
// or ten times as long as the last full cycle took, whichever is longer (so that full cycles take
// at most a tenth of the scheduler's time).
// Owned by the scheduler (under ControlPlane::schedule_mu_).
struct SchedulerMemory {
  bool valid = false;   // false: the next cycle is full (first cycle, an error, a skipped decision)
  int64_t full_us = 0;  // when the last full cycle ended
  int64_t full_took_us = 0;  // and how long it took
  uint64_t config_revision = 0;
  std::optional<Cluster> base;  // the nodes as the last cycle saw them, without holdings
  // What every placed job held once the last cycle's binds were applied, and which of them were
  // stopping then.
  std::map<int64_t, std::vector<ReplicaPlacement>> held;
  std::set<int64_t> stopping;
  absl::flat_hash_map<int64_t, uint64_t> parked;  // job -> the revision its verdict was made on
  int64_t reserved_job = 0;

  // Why the cycle about to run must plan every job, given what it sees now; empty when it may
  // plan only new or changed work.
  std::string FullCycleReason(int64_t now, int64_t every_us, uint64_t config_revision,
                              const Cluster& base,
                              const std::map<int64_t, std::vector<ReplicaPlacement>>& held,
                              const std::set<int64_t>& stopping) const;
  // Whether `job` at `revision` stays out of an incremental cycle.
  bool Parked(int64_t job, uint64_t revision) const {
    auto it = parked.find(job);
    return it != parked.end() && it->second == revision && job != reserved_job;
  }
};

}  // namespace carve

#endif  // CARVE_RUNTIME_SCHEDULER_MEMORY_H_
