// Prometheus text exposition of the control plane's state (served at /metrics).
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

// name{k="v",...} value
class Exposition {
 public:
  using Labels = std::initializer_list<std::pair<absl::string_view, absl::string_view>>;
  void Help(absl::string_view name, absl::string_view type, absl::string_view help) {
    absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  // Labels in the order given (callers give them sorted by name).
  void Sample(absl::string_view name, Labels labels, double value) {
    absl::StrAppend(&text_, name);
    const char* sep = "{";
    for (const auto& [k, v] : labels) {
      absl::StrAppend(&text_, sep, k, "=\"", Escape(v), "\"");
      sep = ",";
    }
    absl::StrAppend(&text_, labels.size() > 0 ? "} " : " ", absl::StrFormat("%.6g", value), "\n");
  }
  std::string text() && { return std::move(text_); }

 private:
  static std::string Escape(absl::string_view v) {
    if (v.find_first_of("\\\"\n") == absl::string_view::npos) return std::string(v);
    return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
  }
  std::string text_;
};

// One live job as the exposition needs it, copied under the lock and formatted without it.
struct JobSample {
  int64_t id = 0;
  JobState state = JobState::kQueued;
  std::string tenant, project, queue;
  int64_t created_us = 0;
  bool placed = false;  // has replicas (a placed job's records, or a queued retry's)
  double held_gpus = 0;
};

}  // namespace

// Only the walk over nodes and live jobs is under the lock; the text is made after it (with
// 100,000 queued jobs a scrape held the lock for 0.2-0.3 s: `carve_control_bench
// --benchmark_filter=ReadMetrics`, docs/evaluation.md).
std::string ControlPlane::Metrics(const Principal& who) const {
  std::map<std::tuple<std::string, std::string, std::string>, int> gpus;
  std::map<std::tuple<std::string, std::string>, int> depth;  // tenant, queue
  // Finished jobs' reclaim records were counted when they ended (counter record "finished").
  std::map<std::string, int64_t> reclaims;
  std::vector<JobSample> jobs;
  int64_t now = 0, drift = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now = now_();
    drift = last_cycle_.cluster_drift;
    reclaims = done_reclaims_;
    const std::vector<PoolSelector> pools = config_.Pools();
    for (const auto& [name, node] : nodes_) {
      const std::string pool = PoolOf(node.labels, pools);
      for (const DiscoveredGpu& g : node.gpus) {
        auto id = catalog_->Find(g.model);
        std::string model = id.ok() ? catalog_->model(*id).name : g.model;
        ++gpus[{pool, model, "installed"}];
        if (node.Online()) ++gpus[{pool, model, "online"}];
        if (node.Schedulable(g)) ++gpus[{pool, model, "schedulable"}];
        if (node.quarantined.count(g.index)) ++gpus[{pool, model, "quarantined"}];
      }
    }
    jobs.reserve(jobs_.size());
    for (const auto& [id, job] : jobs_.all()) {
      for (const ReplicaRecord& r : job.replicas) {
        if (!r.reclaim.is_null() && !finishing_.count(id)) {
          ++reclaims[r.reclaim.value("status", "unknown")];
        }
      }
      if (!Allowed(who, Access::kRead, job.spec.tenant, job.spec.project)) continue;
      if (job.state == JobState::kQueued) ++depth[{job.spec.tenant, job.spec.queue}];
      if (IsFinal(job.state)) continue;
      JobSample& s = jobs.emplace_back();
      s.id = id;
      s.state = job.state;
      s.tenant = job.spec.tenant;
      s.project = job.spec.project;
      s.queue = job.spec.queue;
      s.created_us = job.created_us;
      s.placed = !job.replicas.empty();
      std::string model;
      for (const ReplicaRecord& r : job.replicas) {
        for (const GrantRecord& g : r.grants) {
          s.held_gpus += GrantGpus(*catalog_, nodes_, r.node, g, &model);
        }
      }
    }
  }
  Exposition m;
  m.Help("carve_gpus", "gauge", "GPUs by pool, model and state (installed, online, schedulable)");
  for (const auto& [k, n] : gpus) {
    m.Sample("carve_gpus",
             {{"model", std::get<1>(k)}, {"pool", std::get<0>(k)}, {"state", std::get<2>(k)}}, n);
  }
  m.Help("carve_job_allocated_gpus", "gauge",
         "GPUs a scheduled or running job holds (MIG by compute slices, shares by milli-GPU)");
  for (const JobSample& s : jobs) {
    if (!s.placed) continue;
    std::string id = absl::StrCat(s.id);
    m.Sample("carve_job_allocated_gpus",
             {{"job", id}, {"project", s.project}, {"state", Name(s.state)}, {"tenant", s.tenant}},
             s.held_gpus);
  }
  m.Help("carve_scheduler_kept_cluster_drift_total", "counter",
         "Cycles whose cluster kept from the last cycle differed from the job records (a bug; "
         "the cycle planned on the rebuilt one)");
  m.Sample("carve_scheduler_kept_cluster_drift_total", {}, static_cast<double>(drift));
  m.Help("carve_queue_depth", "gauge", "Jobs waiting, by tenant and queue");
  for (const auto& [k, n] : depth) {
    m.Sample("carve_queue_depth", {{"queue", std::get<1>(k)}, {"tenant", std::get<0>(k)}}, n);
  }
  m.Help("carve_job_wait_seconds", "gauge", "How long each queued job has waited");
  for (const JobSample& s : jobs) {
    if (s.state != JobState::kQueued) continue;
    std::string id = absl::StrCat(s.id);
    m.Sample("carve_job_wait_seconds", {{"job", id}, {"queue", s.queue}, {"tenant", s.tenant}},
             static_cast<double>(now - s.created_us) / 1e6);
  }
  if (who.role == Role::kAdmin) {
    m.Help("carve_reclaims", "gauge", "Replica reclaim records of stored jobs, by outcome");
    for (const auto& [status, n] : reclaims) {
      m.Sample("carve_reclaims", {{"outcome", status}}, static_cast<double>(n));
    }
  }
  return std::move(m).text();
}

}  // namespace carve
