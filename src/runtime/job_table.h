#ifndef CARVE_RUNTIME_JOB_TABLE_H_
#define CARVE_RUNTIME_JOB_TABLE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "core/model/gpu_catalog.h"
#include "core/sched/queueing/resources.h"
#include "core/sched/request.h"
#include "runtime/records.h"

namespace carve {

// The jobs the controller holds in memory (the live ones, and finished ones until their final
// record is committed) and the indexes its walks use, so that their cost follows live work and
// not every job ever submitted:
// - active: jobs not in a final state, each with a revision raised by every change (a plan
//   applies only to jobs it saw as they are);
// - placed: active jobs past the queue (scheduled, running, reclaiming), which hold or held
//   replicas on nodes;
// - replicas by node: each node's placed jobs, and each placed job's nodes;
// - queued totals: per queue, its queued jobs and what they would charge its quota;
// - each job's request as the core takes it (ToJobRequest), kept per job.
// Every change of a job is followed by Index (the control plane's Touch does it), which keeps
// the indexes in step. Not thread-safe: the control plane's lock guards it.
class JobTable {
 public:
  struct Live {
    JobRecord* job = nullptr;  // into the table; stays put until Erase
    uint64_t revision = 0;
    bool queued = false;  // counted in the queued totals (its state is queued)
  };
  using LiveJobs = absl::btree_map<int64_t, Live>;
  struct QueuedTotal {
    int jobs = 0;
    ResourceList demand;
  };

  // `catalog` outlives the table (requests and quota charges are made with it).
  explicit JobTable(const GpuCatalog* catalog) : catalog_(catalog) {}
  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  // Null when the job is not in memory (finished and forgotten, or never submitted).
  JobRecord* Find(int64_t id);
  const JobRecord* Find(int64_t id) const;
  // The job, which must be in memory.
  JobRecord& At(int64_t id);
  bool Contains(int64_t id) const { return jobs_.count(id) > 0; }
  size_t size() const { return jobs_.size(); }
  // Every job in memory, in id order.
  const std::map<int64_t, JobRecord>& all() const { return jobs_; }

  // Takes a job into memory (a submission, a load), replacing one of the same id, and indexes it.
  JobRecord& Add(JobRecord job);
  // Keeps the indexes in step with `job` after a change. `job` may be a copy (a finished job
  // read back from the store): only a job in memory is indexed as active.
  void Index(const JobRecord& job);
  // Drops a finished job from memory (once its final record is committed). False, and nothing
  // changes, when the job is not in memory or not final.
  bool Erase(int64_t id);

  const LiveJobs& active() const { return active_; }
  const LiveJobs& placed() const { return placed_; }
  // 0 for a job not active.
  uint64_t Revision(int64_t id) const;
  // The last revision handed out: every change so far has one at or below it.
  uint64_t last_revision() const { return next_revision_; }
  // Copies, so that a loop over them may change jobs (which re-indexes them).
  std::vector<int64_t> ActiveIds() const;
  std::vector<JobRecord*> Placed() const;
  // The placed jobs with a replica on `node`, in id order.
  std::vector<JobRecord*> PlacedOn(const std::string& node) const;
  // Whether the index has placed job `id` on `node`.
  bool IndexedOn(int64_t id, const std::string& node) const;
  // Per queue with queued jobs: how many, and what they would charge its quota.
  const std::map<std::string, QueuedTotal>& queued() const { return queued_; }

  // The job's request as the core takes it, kept per job: a spec changes only when a service is
  // scaled (its replica count, compared here). Null for a spec the catalog refuses (validated
  // at submission).
  const JobRequest* RequestOf(const JobRecord& job) const;

 private:
  void IndexNodes(const JobRecord& job, bool placed);
  void CountQueued(const JobRecord& job, int sign);

  const GpuCatalog* catalog_;
  std::map<int64_t, JobRecord> jobs_;
  uint64_t next_revision_ = 0;
  LiveJobs active_;
  LiveJobs placed_;  // active_ less the queued jobs
  std::map<std::string, std::set<int64_t>> placed_on_;
  absl::flat_hash_map<int64_t, std::vector<std::string>> nodes_of_;
  std::map<std::string, QueuedTotal> queued_;
  mutable absl::node_hash_map<int64_t, JobRequest> requests_;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_JOB_TABLE_H_
