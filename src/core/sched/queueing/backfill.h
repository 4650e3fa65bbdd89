#ifndef CARVE_CORE_SCHED_QUEUEING_BACKFILL_H_
#define CARVE_CORE_SCHED_QUEUEING_BACKFILL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/sched/placement/placer.h"

namespace carve {

// A running job as the reservation sees it: what it holds and when it ends at the latest.
struct Holding {
  const std::vector<ReplicaPlacement>* replicas = nullptr;
  int64_t end_us = 0;  // kNoEnd when it declares no max runtime
};
inline constexpr int64_t kNoEnd = INT64_MAX;

// A backfill reservation (as in Slurm's backfill): the earliest time the first job blocked on
// placement could start, found by releasing running jobs in the order of their declared ends,
// and the cluster as it will be then. A later job may start now only if it ends by then or if
// the reserved job still fits next to it at that time: it can never delay the reserved start.
class Reservation {
 public:
  // nullptr when `job` would not fit even once every running job has ended.
  static std::unique_ptr<Reservation> Make(const Cluster& cluster, const PlacementPolicy* policy,
                                           int64_t job_id, const JobRequest& job,
                                           std::vector<Holding> running);
  // Use Make; `future` is the cluster at `start_us`.
  Reservation(const Cluster& future, const PlacementPolicy* policy, int64_t job_id,
              const JobRequest& job, int64_t start_us);
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;

  int64_t job() const { return job_; }
  // When the reserved job is expected to start; -1 when that waits on a job without a declared
  // max runtime.
  int64_t start_us() const { return start_us_; }
  // Whether a job holding `replicas` from now until `end_us` (kNoEnd: unknown) leaves the
  // reserved start intact. Changes nothing.
  bool Allows(const std::vector<ReplicaPlacement>& replicas, int64_t end_us);
  // The job started: if it outlives the reserved start, the future cluster holds it too.
  void Record(const std::vector<ReplicaPlacement>& replicas, int64_t end_us);

 private:
  Cluster future_;
  Placer placer_;
  int64_t job_;
  JobRequest request_;
  int64_t start_us_;
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_BACKFILL_H_
