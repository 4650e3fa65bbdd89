#ifndef CARVE_CORE_SCHED_QUEUEING_PREEMPTION_H_
#define CARVE_CORE_SCHED_QUEUEING_PREEMPTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/sched/placement/placer.h"
#include "core/sched/queueing/jobs.h"
#include "core/sched/queueing/quota.h"

namespace carve {

// A running job as preemption sees it.
struct VictimCandidate {
  const RunningJob* job = nullptr;
  ResourceList charge;
  bool stopping = false;  // already told to stop: its resources come back at no new cost
  // The preemptor it stops for (0: none, e.g. cancelled): what it frees is that job's alone.
  int64_t claimed_by = 0;
  bool uncharged = false;  // its quota already passed to the preemptor this cycle
};

// The preemptor: a job that could not be admitted or placed, and its quota demand.
struct Preemptor {
  const PendingJob* job = nullptr;
  ResourceList demand;
};

struct VictimSet {
  // The preemptor fits once the stopping jobs and `victims` are gone.
  bool fits = false;
  std::vector<size_t> victims;     // indexes into the candidates, in the order chosen
  std::vector<std::string> kinds;  // per victim: "reclaim", "priority" or "reservation"
  // Where the preemptor goes once the victims and the jobs stopping for it are gone.
  std::vector<ReplicaPlacement> placement;
};

// Finds a smallest set of victims whose removal makes the preemptor fit both its quota and the
// cluster, and never one that does not (so preemption cannot loop). Who may be a victim: a
// preemptible, not yet stopping job that is either of the preemptor's queue with a lower base
// priority, or of another queue that runs on borrowed capacity while the preemptor's queue
// stays within its nominal quota (reclaim), or that borrows the nodes of an active reservation
// the preemptor holds (reservation). Candidates are tried borrowers first, then lowest
// priority, then least progress lost (latest start), then highest id; a last pass drops every
// victim the preemptor can do without. Leaves the placer's cluster, the placer and the ledger as
// they were.
VictimSet FindVictims(Placer& placer, QuotaLedger& ledger, const Preemptor& preemptor,
                      const std::vector<VictimCandidate>& candidates, int max_candidates);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_PREEMPTION_H_
