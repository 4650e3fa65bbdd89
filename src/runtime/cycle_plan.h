#ifndef CARVE_RUNTIME_CYCLE_PLAN_H_
#define CARVE_RUNTIME_CYCLE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"
#include "core/sched/queueing/cycle.h"
#include "core/sched/queueing/explain.h"
#include "nlohmann/json.hpp"
#include "runtime/labels.h"

namespace carve {

struct NodeRecord;

// A node as the core sees it, from its record: state, maintenance, labels and pool (its label,
// else the first of `pools` it matches), devices, static MIG instances (scheduler_cycle.cc);
// `taints` are added (the reservations': reservations.h).
Node NodeFromRecord(const GpuCatalog& catalog, const std::string& name, const NodeRecord& rec,
                    const std::vector<PoolSelector>& pools = {},
                    const std::vector<Taint>& taints = {});

// What one placed job holds, as a cycle read it from the job's record at `revision` (0: bound by
// the last cycle, read from its record again by the next).
struct Holding {
  std::vector<ReplicaPlacement> placements;
  std::string queue;
  uint64_t revision = 0;
};
using Holdings = absl::flat_hash_map<int64_t, Holding>;

// A replica of a running service that the cycle places: a replacement or a scale-up.
struct ReplicaWork {
  int64_t job = 0;
  size_t replica = 0;
};

// Why each waiting job waits, as one cycle's core gave it. Built without the lock after the core
// plans; published whole (one pointer swap) when the plan is applied, then never changed, so the
// scheduler compares the next cycle's explanations with it without the lock.
struct Waiting {
  WaitExplanation wait;
  std::string summary;    // wait.Summary(), what the job's record says
  std::string signature;  // wait.Signature(): a new one is recorded, new counts alone are not
  nlohmann::json extra = nlohmann::json::object();  // a replica's: explanation, replica, slot
  // The cycle that judged it: when, whether it planned every job, and how many it ordered
  // (wait.position is the place among those).
  int64_t at_us = 0;
  bool full = true;
  size_t planned = 0;
  bool gone = false;  // an incremental cycle's mark: no explanation (compare it again)
};
using WaitMap = std::unordered_map<int64_t, Waiting>;
// The last full cycle's explanations, and on top of them those of the incremental cycles since
// (SchedulerMemory): a parked job keeps the explanation of the cycle that judged it. The
// incremental cycles' tables are layers, shared between successive tables (publishing one copies
// none), merged as in a log-structured tree so that few are searched (Stack).
struct WaitTable {
  std::shared_ptr<const WaitMap> base = std::make_shared<WaitMap>();
  std::vector<std::shared_ptr<const WaitMap>> layers;  // oldest first: the newest entry wins

  const Waiting* Find(int64_t job) const {
    for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) {
      if (auto it = (*layer)->find(job); it != (*layer)->end()) {
        return it->second.gone ? nullptr : &it->second;
      }
    }
    auto it = base->find(job);
    return it == base->end() ? nullptr : &it->second;
  }
  // Puts `layer` on top, then merges the top two while the newer is at least half the size of
  // the older: each entry is copied O(log n) times over the layers' lives, and at most
  // O(log n) layers are searched.
  void Stack(std::shared_ptr<const WaitMap> layer);
};

// One scheduling cycle's plan (Nomad's plan/apply). Taken under the control plane's lock: a copy
// of the live state the core plans on. The core's cycle runs on it without the lock, so API calls
// and heartbeats never wait for it; the decisions are then applied under the lock again, each only
// if what it was planned on still holds (the job and the nodes it touches unchanged).
struct CyclePlan {
  explicit CyclePlan(const GpuCatalog* catalog) : base(catalog), cluster(catalog) {}
  CyclePlan(const CyclePlan&) = delete;
  CyclePlan& operator=(const CyclePlan&) = delete;

  int64_t now = 0;
  // The nodes as their records described them (no job's holdings): what each bind's node must
  // still look like when the plan is applied.
  Cluster base;
  Cluster cluster;  // base plus every active job's holdings: what the core plans on
  std::map<std::string, NodeId> ids;
  bool nodes_changed = true;   // base is not the last cycle's (SchedulerMemory::base)
  bool cluster_kept = false;   // cluster is the last cycle's, brought up to date
  Holdings held;               // what each active job holds
  std::set<int64_t> stopping;  // of those, told to stop and claimed by no preemptor
  std::unique_ptr<PlacementPolicy> policy;
  CycleInput in;
  std::vector<ReplicaWork> work;  // entry -1 - i of in.pending is work[i]
  // The tenant of each job planned (queued jobs and services with replica work): why a job waits
  // names another job only when both are one tenant's (HideOtherTenants).
  std::map<int64_t, std::string> tenants;
  // The revision of each job the plan read (ControlPlane::Touch raises it on every change), by
  // job id ascending.
  std::vector<std::pair<int64_t, uint64_t>> revisions;
  uint64_t config_revision = 0;  // queues, projects, classes: a plan made under others is void
  // The revisions this plan's application made, as ranges (from, to]: the last is open while
  // the lock is held; the application lets go of the lock between slices of explanations.
  // A job changed only by them is still as planned.
  std::vector<std::pair<uint64_t, uint64_t>> own;
  bool void_ = false;  // queues, projects or classes changed since the plan: nothing applied
  // Full, or incremental: parked jobs left out (SchedulerMemory), with what made it full.
  bool incremental = false;
  std::string full_why;
  size_t parked = 0;
  // Parked jobs a release lets back in: those of these queues waiting only on quota, and these
  // (ControlPlane::Unpark).
  std::set<std::string> unparked_queues;
  absl::flat_hash_set<int64_t> unparked_jobs;
  // The reservation passed on since the last cycle (its holder started or left): the cycle says
  // so (CycleStats::why); with ControlPlane::Options::unpark_by_room off, it is full.
  bool reopened = false;
  size_t skipped = 0;  // binds and preemptions the application found stale
  // Made without the lock from the core's decisions: why each job waits, and which of
  // decisions.waits must be recorded under the lock (a new or changed explanation, a replica's).
  std::shared_ptr<WaitMap> waits;
  std::vector<size_t> explain;
  std::set<int64_t> explained_work;           // services whose first waiting replica was recorded
  std::shared_ptr<const WaitTable> replaced;  // the table this plan's replaced, freed with it
  std::vector<int64_t> dropped;               // jobs bound, or whose explanation was not recorded
  // Per queue and resource, the waiting jobs this cycle's quota gate held: how many, and the
  // first one's verdict (the queue's used, nominal and borrowable). Made without the lock; a
  // queue that starts or stops holding jobs is recorded once (ControlPlane::RecordQuotaHolds),
  // not in each job's record.
  struct QuotaHold {
    QuotaVerdict verdict;
    size_t jobs = 0;
  };
  std::map<std::pair<std::string, std::string>, QuotaHold> quota_holds;
};

// What a waiting job's explanation may say of other jobs: a job of another tenant (`tenants`:
// each planned job's) holding the reservation, or ahead of it in the queue, is not named (its id
// says it exists; L1): "a job of another tenant", reserved_job and the ahead entry's job 0.
void HideOtherTenants(WaitExplanation& w, int64_t job,
                      const std::map<int64_t, std::string>& tenants);

}  // namespace carve

#endif  // CARVE_RUNTIME_CYCLE_PLAN_H_
