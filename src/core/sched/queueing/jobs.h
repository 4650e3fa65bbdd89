#ifndef CARVE_CORE_SCHED_QUEUEING_JOBS_H_
#define CARVE_CORE_SCHED_QUEUEING_JOBS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/sched/placement/fit.h"
#include "core/sched/queueing/topology.h"
#include "core/sched/request.h"

namespace carve {

// The jobs one scheduling cycle sees: those waiting, and those holding resources.
struct PendingJob {
  int64_t id = 0;
  std::string queue;
  int64_t priority = 0;
  bool preemptible = true;
  int64_t submitted_us = 0;    // when it (last) joined the queue: the start of its aging
  int64_t max_runtime_us = 0;  // declared limit; 0: none (it can only backfill around nothing)
  JobRequest request;
  Topology topology = Topology::kAny;
  // When it preempted jobs (in an earlier cycle) to start, if it has not started since; 0: never.
  int64_t nominated_us = 0;
  // Replica work of a running job (a service's replacement or scale-up): `id` is this entry's own,
  // unique, and `job` the running job's; 0: the entry is a job. Binds and waits name the entry;
  // what people read (preemption reasons, `ahead`, the reservation) names the job, and an entry
  // never preempts its own job.
  int64_t job = 0;
  // A replacement takes back the quota its replica held: admitted without a quota check (and it
  // claims no quota when it preempts).
  bool quota_held = false;
  // The active reservations it holds: it may preempt the jobs borrowing their nodes.
  std::vector<std::string> holds = {};
};

// The job a pending entry belongs to.
inline int64_t JobOf(const PendingJob& p) { return p.job != 0 ? p.job : p.id; }

struct RunningJob {
  int64_t id = 0;
  std::string queue;
  int64_t priority = 0;
  bool preemptible = true;
  int64_t started_us = 0;
  int64_t max_runtime_us = 0;
  JobRequest request;
  std::vector<ReplicaPlacement> replicas;  // what it holds in the cluster
  // Already told to stop (preempted, cancelled, drained): it holds its devices until they are
  // reclaimed, and is never chosen as a victim again.
  bool stopping = false;
  int64_t preempted_by = 0;  // the job it was preempted for, if any
  // The active reservation whose nodes it runs on without holding it (empty: none): a job that
  // holds the reservation may preempt it.
  std::string borrows = {};
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_JOBS_H_
