#ifndef CARVE_CORE_SCHED_QUEUEING_EXPLAIN_H_
#define CARVE_CORE_SCHED_QUEUEING_EXPLAIN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/sched/placement/placer.h"
#include "core/sched/queueing/quota.h"

namespace carve {

// The gates a pending job passes, in the order they apply.
enum class Gate : uint8_t {
  kQuota,       // its queue has no quota left for it
  kGang,        // some replicas fit now, not all: none start
  kPlacement,   // no node takes a replica
  kOrder,       // it would fit, but starting it would delay the job holding the reservation
  kPreemption,  // victims were signalled for it; it starts once they have stopped
};
absl::string_view ToString(Gate gate);

// One job ahead of a waiting job in the order, and why it is ahead.
struct AheadOf {
  int64_t job = 0;
  std::string why;
};

struct GateFacts {
  Gate gate = Gate::kPlacement;
  std::string summary;  // one line, for people
  // kQuota: the first resource that does not fit.
  std::string queue;
  QuotaVerdict quota;
  // kGang: replicas placeable now vs needed.
  int needed = 0;
  int placeable = 0;
  // kPlacement: nodes per reason (FitReason names, plus "cordoned" split from not-ready).
  int nodes_considered = 0;
  std::map<std::string, int> reasons;
  // kOrder: the job holding the reservation and when it is expected to start (-1: unknown).
  int64_t reserved_job = 0;
  int64_t reserved_start_us = -1;
  // kPreemption: the jobs stopping for this one.
  std::vector<int64_t> victims;
};

// Why a job waits, gate by gate, and what would make it fit.
struct WaitExplanation {
  int64_t job = 0;
  std::vector<GateFacts> gates;
  std::string fix;             // "needs 4 whole H200-141GB on one node; best node has 3 free"
  int position = 0;            // 0-based place among the pending jobs this cycle
  std::vector<AheadOf> ahead;  // the nearest waiting jobs ahead of it, nearest first
  bool reserved = false;       // it holds the backfill reservation
  int64_t reserved_start_us = -1;
  // Settled: only something released (a job ending, a node or GPU coming back, a quota or rule
  // changed) or time passing (aging) can change this verdict: it waits on quota, placement or
  // its gang, no victims were found for it (or preemption is off, or the cycle's preemption
  // searches ran out before it), and it neither holds the reservation nor is held back by it. A
  // caller may leave such a job out of later cycles until something is released (Kueue's
  // inadmissible workloads).
  bool settled = false;

  std::string Summary() const;  // the gates' summaries joined by "; "
  // The reason without its counts: the gates, which resource or queue, which kinds of node
  // failure, which job holds the reservation or stops for it. Two cycles that give a job the same
  // signature keep it waiting for the same reason, even where counts (nodes per failure, quota
  // used) moved.
  std::string Signature() const;
  // What a job's own record keeps: every gate but its queue's quota, unless the quota is all that
  // holds it. A queue crossing its quota moves that gate for every waiting job of the queue at
  // once; the runtime records such a crossing once, for the queue (event queue.quota-holds),
  // instead of rewriting each job's record.
  std::string OwnSummary() const;
  std::string OwnSignature() const;
};

// The placement gate's facts from a failed placement: per-reason counts, with nodes that are
// cordoned counted apart from those that are not ready.
GateFacts PlacementGate(const Cluster& cluster, const FitReport& report);
// What would make one replica fit, from the nearest node: "needs 4 whole H200-141GB on one
// node; best node has 3 free", "needs a 300m GPU share on one device; best device has 200m free".
std::string NearestFit(const Cluster& cluster, const ReplicaRequest& replica);
// The quota gate: "queue a: gpus 6/8 used, needs 4, 0 borrowable".
GateFacts QuotaGate(const std::string& queue, const QuotaVerdict& verdict);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_EXPLAIN_H_
