#ifndef CARVE_CORE_SCHED_QUEUEING_CYCLE_H_
#define CARVE_CORE_SCHED_QUEUEING_CYCLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"
#include "core/sched/queueing/explain.h"
#include "core/sched/queueing/jobs.h"
#include "core/sched/queueing/order.h"
#include "core/sched/queueing/quota.h"
#include "core/sched/request.h"

namespace carve {

struct CycleOptions {
  AgingOptions aging;
  bool backfill = true;
  bool preemption = true;
  // Victims considered per preemptor, best first; bounds the cost of one preemption search.
  int max_victim_candidates = 64;
  // Preemption searches per cycle (each probes placements): bounds a cycle's cost when many
  // jobs are blocked. Searches that found nothing are remembered per request shape.
  int max_preemption_searches = 32;
  int waiting_ahead_listed = 3;  // jobs listed in each explanation's `ahead`
  // Equal requests of one queue share their quota charge and, while no charge has moved the
  // ledger since, their quota verdict. Off only to test that sharing changes no decision.
  bool share_quota_verdicts = true;
};

// Everything one cycle sees. `cluster` holds the running jobs' allocations already; the cycle
// applies its binds to it (so the caller can read the cluster after the cycle).
struct CycleInput {
  Cluster* cluster = nullptr;
  const PlacementPolicy* policy = nullptr;
  uint64_t seed = 0;
  std::vector<QueueSpec> queues;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  int64_t now_us = 0;
  CycleOptions options;
};

struct Bind {
  int64_t job = 0;
  std::vector<ReplicaPlacement> replicas;
  ResourceList charge;
  bool backfilled = false;  // started ahead of the job holding the reservation
};

struct Preemption {
  int64_t victim = 0;
  int64_t preemptor = 0;  // the job it stops for (JobOf the pending entry)
  std::string victim_queue;
  // "reclaim": the preemptor's queue takes back quota it lent ("for queue Q's guarantee");
  // "priority": a higher-priority job of the same queue.
  std::string kind;
  std::string reason;
};

struct Decisions {
  std::vector<Bind> binds;
  std::vector<Preemption> preemptions;
  std::vector<WaitExplanation> waits;
  int64_t reserved_job = 0;  // 0: none
  int64_t reserved_start_us = -1;
};

// One pure scheduling cycle: order the pending jobs, admit against quota, place gangs (all
// replicas or none) with the policy and topology preference, keep one backfill reservation for
// the first job blocked on placement, preempt the smallest set of victims that makes a job with
// a claim fit, and explain every job left waiting. Deterministic for equal input.
// REQUIRES: input.cluster and input.policy are set; ids are unique.
Decisions Schedule(CycleInput& input);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_CYCLE_H_
