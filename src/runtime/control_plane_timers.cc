// What happens with time: leases that run out, GPUs held without activity, maintenance windows.
#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/input_limits.h"
#include "runtime/notification_config.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr const char* kMaintenanceTaint = "carve.io/maintenance";

// When the job's present wait began: its submission, or the end of its last attempt (a requeue).
int64_t QueuedSince(const JobRecord& job) {
  return job.attempts.empty() ? job.created_us
                              : std::max(job.created_us, job.attempts.back().ended_us);
}

std::string Duration(int64_t us) {
  int64_t s = us / 1'000'000;
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m");
  return absl::StrCat(s / 3600, "h");
}

}  // namespace

void ControlPlane::Activity(NodeRecord& node, const std::vector<GpuReport>& gpus,
                            StoreBatch& batch) {
  for (const GpuReport& g : gpus) {
    if (g.index >= 0 && g.index < static_cast<int>(node.gpus.size())) {
      node.gpus[g.index].utilization_pct = g.utilization_pct;
    }
  }
  int64_t now = now_();
  for (JobRecord* placed : jobs_.PlacedOn(node.name)) {
    JobRecord& job = *placed;
    const int64_t id = job.id;
    if (job.state != JobState::kRunning) continue;
    bool active = false;
    for (ReplicaRecord& rep : job.replicas) {
      if (rep.node != node.name || rep.state != ReplicaState::kRunning || rep.grants.empty()) {
        continue;
      }
      bool known = true, busy = false;
      for (const GrantRecord& g : rep.grants) {
        int u = g.device < static_cast<int>(node.gpus.size()) ? node.gpus[g.device].utilization_pct
                                                              : -1;
        known &= u >= 0;
        busy |= u > 0;
      }
      if (!known || busy) {
        active |= busy;
        rep.idle_since_us = 0;
      } else if (rep.idle_since_us == 0) {
        rep.idle_since_us = now;
      }
    }
    if (active && job.idle_flagged_us != 0) {
      job.idle_flagged_us = 0;
      Event(batch, "agent:" + node.name, "job.active", absl::StrCat("job/", id),
            "its GPUs are busy again");
      Touch(job, batch);
    }
  }
}

void ControlPlane::Timers(int64_t now, StoreBatch& batch) {
  for (JobRecord* placed : jobs_.Placed()) {
    JobRecord& job = *placed;
    const int64_t id = job.id;
    if (job.state != JobState::kRunning || job.cancel_requested) continue;
    std::string subject = absl::StrCat("job/", id);
    // Leases that ran out: stop the job so its GPUs come back.
    if (job.lease_expires_us != 0 && now > job.lease_expires_us) {
      job.cancel_requested = true;
      job.cancelled_by = "the platform: its " + job.spec.Lease() + " lease expired unrenewed";
      job.reason = "stopping: lease expired";
      Event(batch, "scheduler", "job.lease-expired", subject, job.cancelled_by);
      Touch(job, batch);
      continue;
    }
    // GPUs held without activity, as long as its queue allows.
    const QueueConfig* queue = config_.Queue(job.spec.queue);
    if (queue == nullptr || !queue->idle_after_us) continue;
    int64_t idle_since = 0;
    bool holds = false, all_idle = true;
    for (const ReplicaRecord& rep : job.replicas) {
      if (rep.grants.empty() || rep.state != ReplicaState::kRunning) continue;
      holds = true;
      all_idle &= rep.idle_since_us != 0;
      idle_since = std::max(idle_since, rep.idle_since_us);
    }
    int64_t after = *queue->idle_after_us;
    if (!holds || !all_idle || job.idle_flagged_us != 0 || now - idle_since < after) continue;
    std::string action = Name(queue->idle_action);
    job.idle_flagged_us = now;
    std::string why =
        absl::StrCat("its GPUs showed no activity for ", Duration(now - idle_since), " (queue ",
                     job.spec.queue, ": idle_after ", queue->idle_after, ")");
    Event(batch, "scheduler", "job.idle", subject, why,
          {{"idle_since_us", idle_since}, {"queue", job.spec.queue}, {"action", action}});
    if (queue->idle_action == IdleAction::kStop) {
      job.cancel_requested = true;
      job.cancelled_by = "the platform: " + why;
      job.reason = "stopping: idle";
    }
    Touch(job, batch);
  }
  AlertLongWaits(now, batch);
  for (auto& [name, node] : nodes_) {
    if (!node.maintenance) continue;
    MaintenanceWindow& window = *node.maintenance;
    std::string subject = "node/" + name;
    if (window.phase == WindowPhase::kScheduled && now >= window.start_us) {
      window.phase = WindowPhase::kActive;
      std::string cause =
          absl::StrCat("maintenance of node ", name, " by ", window.by, ": ", window.reason);
      json moved = MoveOff(name, -1, -1, cause, true, batch)["jobs"];
      Event(batch, "scheduler", "node.maintenance-started", subject, cause,
            {{"jobs", moved}, {"window", window.ToJson()}});
      batch.puts.push_back({"node", name, node.ToJson().dump()});
    } else if (window.phase == WindowPhase::kActive && now >= window.end_us) {
      Event(batch, "scheduler", "node.maintenance-ended", subject, "back in service",
            {{"window", window.ToJson()}});
      node.maintenance.reset();
      batch.puts.push_back({"node", name, node.ToJson().dump()});
    }
  }
  ReservationTimers(now, batch);
}

json ControlPlane::JobsOn(const std::string& node) const {
  json ids = json::array();
  for (const JobRecord* job : jobs_.PlacedOn(node)) {
    if (!IsFinal(job->state) && job->Uses(node)) ids.push_back(job->id);
  }
  return ids;
}

void ControlPlane::AlertLongWaits(int64_t now, StoreBatch& batch) {
  if (now - waits_alerted_us_ < 1'000'000) return;
  waits_alerted_us_ = now;
  std::map<std::string, std::set<int64_t>> thresholds;  // tenant -> its notifications' thresholds
  for (const NotificationConfig& n : config_.Notifications()) {
    if (n.wait_longer_than_us > 0 && n.Wants(kWaitExceeded)) {
      thresholds[n.tenant].insert(n.wait_longer_than_us);
    }
  }
  if (thresholds.empty()) return;
  std::vector<std::pair<JobRecord*, int64_t>> crossed;  // job, the longest threshold it passed
  for (const auto& entry : jobs_.active()) {
    if (!entry.second.queued) continue;
    JobRecord& job = *entry.second.job;
    auto tenant = thresholds.find(job.spec.tenant);
    if (tenant == thresholds.end()) continue;
    const int64_t alerted = job.wait_alert_attempt == job.attempt ? job.wait_alert_us : 0;
    const int64_t waited = now - QueuedSince(job);
    int64_t longest = 0;
    for (int64_t t : tenant->second) {
      if (t > alerted && waited >= t) longest = t;
    }
    if (longest > 0) crossed.emplace_back(&job, longest);
  }
  // Touch re-indexes the job: after the walk over the index.
  for (const auto& [job, longest] : crossed) {
    const int64_t alerted = job->wait_alert_attempt == job->attempt ? job->wait_alert_us : 0;
    const int64_t waited = now - QueuedSince(*job);
    for (int64_t t : thresholds[job->spec.tenant]) {  // each one passed since the last look
      if (t <= alerted || t > longest) continue;
      Event(batch, "scheduler", kWaitExceeded, absl::StrCat("job/", job->id),
            absl::StrCat("waiting ", Duration(waited), ", longer than ", Duration(t),
                         job->explanation.empty() ? "" : ": " + job->explanation),
            {{"threshold_us", t}, {"waited_us", waited}, {"attempt", job->attempt}});
    }
    job->wait_alert_us = longest;
    job->wait_alert_attempt = job->attempt;
    Touch(*job, batch);
  }
}

std::set<int64_t> ControlPlane::ScheduledWindows() const {
  std::set<int64_t> starts;
  for (const auto& [name, node] : nodes_) {
    if (node.maintenance && node.maintenance->phase == WindowPhase::kScheduled) {
      starts.insert(node.maintenance->start_us);
    }
  }
  return starts;
}

void ControlPlane::TolerateWindows(JobRequest& request, const JobSpec& spec, int64_t now,
                                   const std::set<int64_t>& windows) {
  if (windows.empty() || spec.max_runtime.empty()) return;  // no max: never before a window
  int64_t ends = now + ParseDurationUs(spec.max_runtime).value_or(0);
  for (auto start = windows.lower_bound(ends); start != windows.end(); ++start) {
    request.replica.tolerations.push_back({kMaintenanceTaint, std::to_string(*start)});
  }
}

absl::StatusOr<json> ControlPlane::Maintenance(const std::string& name, const json& body,
                                               const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kOperate); !s.ok()) return s;
  if (!body.is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (k != "starts_in" && k != "lasts" && k != "reason" && k != "cancel") {
      return absl::InvalidArgumentError(k +
                                        ": unknown field; known: starts_in, lasts, reason, cancel");
    }
    if (k == "cancel" ? !v.is_boolean() : !v.is_string()) {
      return absl::InvalidArgumentError(
          k + (k == "cancel" ? ": must be true or false" : ": must be a string"));
    }
  }
  if (body.contains("reason")) {  // shown to admins in `carve nodes`
    const std::string& reason = body["reason"].get_ref<const std::string&>();
    if (absl::Status s = CheckPrintable("reason", reason, kMaxReasonBytes); !s.ok()) return s;
  }
  int64_t starts_in = 0, lasts = 0;
  bool cancel = body.value("cancel", false);
  if (!cancel) {
    auto in = ParseDurationUs(body.value("starts_in", "0s"));
    if (!in.ok())
      return absl::InvalidArgumentError("starts_in: " + std::string(in.status().message()));
    if (!body.contains("lasts")) return absl::InvalidArgumentError("lasts: how long, e.g. \"2h\"");
    auto d = ParseDurationUs(body.value("lasts", ""));
    if (!d.ok() || *d <= 0) {
      return absl::InvalidArgumentError("lasts: " + (d.ok() ? std::string("must be positive")
                                                            : std::string(d.status().message())));
    }
    starts_in = *in;
    lasts = *d;
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError("no node \"" + name + "\"");
  NodeRecord& node = it->second;
  StoreBatch batch;
  if (cancel) {
    if (!node.maintenance) {
      return absl::FailedPreconditionError("node " + name + " has no maintenance window");
    }
    Event(batch, "user:" + who.name, "node.maintenance-cancelled", "node/" + name,
          "window cancelled", {{"window", node.maintenance->ToJson()}, {"jobs", JobsOn(name)}});
    node.maintenance.reset();
  } else {
    int64_t now = now_();
    node.maintenance = MaintenanceWindow{now + starts_in, now + starts_in + lasts, who.name,
                                         body.value("reason", ""), WindowPhase::kScheduled};
    // The jobs on the node now (details.jobs): their tenants' webhooks hear of it ahead.
    json details = {{"window", node.maintenance->ToJson()}, {"jobs", JobsOn(name)}};
    Event(batch, "user:" + who.name, "node.maintenance-scheduled", "node/" + name,
          absl::StrCat("maintenance in ", Duration(starts_in), " for ", Duration(lasts), ": ",
                       body.value("reason", "")),
          details);
  }
  batch.puts.push_back({"node", name, node.ToJson().dump()});
  json out = node.ToJson();
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

}  // namespace carve
