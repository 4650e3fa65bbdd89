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

std::string Escape(const std::string& v) {
  return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

// name{k="v",...} value
class Exposition {
 public:
  void Help(const std::string& name, const std::string& type, const std::string& help) {
    absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void Sample(const std::string& name, const std::map<std::string, std::string>& labels,
              double value) {
    std::string l;
    for (const auto& [k, v] : labels) {
      absl::StrAppend(&l, l.empty() ? "" : ",", k, "=\"", Escape(v), "\"");
    }
    absl::StrAppend(&text_, name, l.empty() ? "" : "{" + l + "}", " ",
                    absl::StrFormat("%.6g", value), "\n");
  }
  std::string text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace

std::string ControlPlane::Metrics(const Principal& who) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = now_();
  Exposition m;
  m.Help("carve_gpus", "gauge", "GPUs by pool, model and state (installed, online, schedulable)");
  std::map<std::tuple<std::string, std::string, std::string>, int> gpus;
  for (const auto& [name, node] : nodes_) {
    auto pool = node.labels.count("pool") ? node.labels.at("pool") : "default";
    for (const DiscoveredGpu& g : node.gpus) {
      auto id = catalog_->Find(g.model);
      std::string model = id.ok() ? catalog_->model(*id).name : g.model;
      bool online = node.state != NodeRecordState::kNotReady;
      bool usable = online && node.cordoned_by.empty() && !node.cordoned_gpus.count(g.index) &&
                    !node.fenced.count(g.index) && !node.quarantined.count(g.index) &&
                    g.health == "healthy";
      ++gpus[{pool, model, "installed"}];
      if (online) ++gpus[{pool, model, "online"}];
      if (usable) ++gpus[{pool, model, "schedulable"}];
      if (node.quarantined.count(g.index)) ++gpus[{pool, model, "quarantined"}];
    }
  }
  for (const auto& [k, n] : gpus) {
    m.Sample("carve_gpus",
             {{"pool", std::get<0>(k)}, {"model", std::get<1>(k)}, {"state", std::get<2>(k)}}, n);
  }
  std::map<std::tuple<std::string, std::string>, int> depth;  // tenant, queue
  // Finished jobs' reclaim records were counted when they ended (counter record "finished").
  std::map<std::string, int64_t> reclaims = done_reclaims_;
  m.Help("carve_job_allocated_gpus", "gauge",
         "GPUs a scheduled or running job holds (MIG by compute slices, shares by milli-GPU)");
  for (const auto& [id, job] : jobs_) {
    for (const ReplicaRecord& r : job.replicas) {
      if (!r.reclaim.is_null() && !finishing_.count(id)) {
        ++reclaims[r.reclaim.value("status", "unknown")];
      }
    }
    if (!Allowed(who, Access::kRead, job.spec.tenant, job.spec.project)) continue;
    if (job.state == JobState::kQueued) ++depth[{job.spec.tenant, job.spec.queue}];
    if (IsFinal(job.state) || job.replicas.empty()) continue;
    double held = 0;
    std::string model;
    for (const ReplicaRecord& r : job.replicas) {
      for (const GrantRecord& g : r.grants) held += GrantGpus(*catalog_, nodes_, r.node, g, &model);
    }
    m.Sample("carve_job_allocated_gpus",
             {{"tenant", job.spec.tenant},
              {"project", job.spec.project},
              {"job", absl::StrCat(id)},
              {"state", std::string(Name(job.state))}},
             held);
  }
  m.Help("carve_scheduler_kept_cluster_drift_total", "counter",
         "Cycles whose cluster kept from the last cycle differed from the job records (a bug; "
         "the cycle planned on the rebuilt one)");
  m.Sample("carve_scheduler_kept_cluster_drift_total", {}, last_cycle_.cluster_drift);
  m.Help("carve_queue_depth", "gauge", "Jobs waiting, by tenant and queue");
  for (const auto& [k, n] : depth) {
    m.Sample("carve_queue_depth", {{"tenant", std::get<0>(k)}, {"queue", std::get<1>(k)}}, n);
  }
  m.Help("carve_job_wait_seconds", "gauge", "How long each queued job has waited");
  for (int64_t id : ActiveIds()) {
    const JobRecord& job = jobs_.at(id);
    if (job.state != JobState::kQueued ||
        !Allowed(who, Access::kRead, job.spec.tenant, job.spec.project)) {
      continue;
    }
    m.Sample("carve_job_wait_seconds",
             {{"tenant", job.spec.tenant}, {"queue", job.spec.queue}, {"job", absl::StrCat(id)}},
             static_cast<double>(now - job.created_us) / 1e6);
  }
  if (who.role == Role::kAdmin) {
    m.Help("carve_reclaims", "gauge", "Replica reclaim records of stored jobs, by outcome");
    for (const auto& [status, n] : reclaims) m.Sample("carve_reclaims", {{"outcome", status}}, n);
  }
  return m.text();
}

}  // namespace carve
