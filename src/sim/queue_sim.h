#ifndef CARVE_SIM_QUEUE_SIM_H_
#define CARVE_SIM_QUEUE_SIM_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"
#include "core/sched/queueing/cycle.h"

namespace carve::sim {

// A job of the queue simulator: it arrives at `submitted_us` and, once started, runs for
// `duration_us` (cut at `max_runtime_us` when that is set), unless preempted.
struct QueueSimJob : PendingJob {
  int64_t duration_us = 0;
};

struct QueueSimOptions {
  int64_t cycle_us = 1'000'000;  // the least time between two scheduling cycles
  int64_t stop_delay_us = 0;     // a preempted job releases its devices this long after
  int64_t horizon_us = 0;        // stop here; 0: when every job has ended
  std::string policy = "best-fit";
  PolicyOptions policy_options;  // the observed workload fgd and carve score against
  CycleOptions cycle;
  // Called after each cycle with the cluster as placed (for measures the samples do not keep).
  std::function<void(int64_t now, const Cluster& cluster)> observe;
};

// What each queue holds at one time: whole GPUs and shares in milli-GPU, and job counts.
struct QueueUse {
  int64_t gpu_milli = 0;
  int running = 0;
  int pending = 0;
};

struct QueueSimSample {
  int64_t t_us = 0;
  std::map<std::string, QueueUse> queues;
};

struct QueueSimOutcome {
  int64_t first_start_us = -1;
  std::vector<int64_t> starts;  // every start: a preempted job starts again
  int64_t end_us = -1;
  int preempted = 0;
  // The start the first reservation this job held promised (-1: none or unknown).
  int64_t reserved_start_us = -1;
};

struct QueueSimPreemption {
  int64_t t_us = 0;
  Preemption preemption;
};

struct QueueSimResult {
  std::vector<QueueSimSample> samples;  // one per cycle
  std::map<int64_t, QueueSimOutcome> jobs;
  std::vector<QueueSimPreemption> preemptions;
  int cycles = 0;
  int64_t end_us = 0;
  // Broken invariants, in words: a gang bound partially, a device over-committed.
  std::vector<std::string> violations;
};

// Drives the real queueing core (core/sched/queueing) on a virtual clock: arrivals, ends,
// preemptions that release after a stop delay and requeue, one cycle at each event (at least
// `cycle_us` apart). Deterministic.
class QueueSim {
 public:
  QueueSim(Cluster cluster, std::vector<QueueSpec> queues, QueueSimOptions options);
  void Add(QueueSimJob job);
  QueueSimResult Run();

 private:
  struct Active {
    const QueueSimJob* job = nullptr;
    int64_t started_us = 0;
    std::vector<ReplicaPlacement> replicas;
    bool stopping = false;
    int64_t stop_at_us = 0;
    int64_t preempted_by = 0;
  };
  void Finish(int64_t now);
  Decisions Cycle(int64_t now);
  void Record(const Decisions& d, int64_t now);
  void Sample(int64_t now);
  int64_t NextEvent(int64_t now, size_t next_arrival) const;

  Cluster cluster_;
  std::vector<QueueSpec> queues_;
  QueueSimOptions options_;
  std::unique_ptr<PlacementPolicy> policy_;
  std::vector<QueueSimJob> jobs_;
  std::map<int64_t, const QueueSimJob*> by_id_;
  std::map<int64_t, const QueueSimJob*> pending_;
  std::map<int64_t, Active> active_;
  std::map<int64_t, int64_t> nominated_;  // preemptors not started yet -> when they preempted
  QueueSimResult result_;
};

}  // namespace carve::sim

#endif  // CARVE_SIM_QUEUE_SIM_H_
