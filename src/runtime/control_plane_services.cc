// Services (recovery policy failover, the default for inference): a replica that is lost,
// drained or scaled away is replaced alone while the others keep serving.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/sched/queueing/explain.h"
#include "runtime/control_plane.h"
#include "runtime/explain_json.h"

namespace carve {

using json = nlohmann::json;

namespace {

bool Gone(const ReplicaRecord& rep) {
  return rep.state == ReplicaState::kRetired || rep.state == ReplicaState::kLost;
}

// Whether `rep` holds something on `node`: its GPU `gpu`, the MIG instance at slice `start`
// (-1: any). Retired replicas hold nothing.
bool Holds(const ReplicaRecord& rep, const std::string& node, int gpu, int start) {
  if (rep.node != node || rep.state == ReplicaState::kRetired) return false;
  if (gpu < 0) return true;
  return std::any_of(rep.grants.begin(), rep.grants.end(), [&](const GrantRecord& g) {
    return g.device == gpu && (start < 0 || (!g.profile.empty() && g.start == start));
  });
}

bool Serving(const ReplicaRecord& rep) {
  return rep.retire.empty() && rep.state == ReplicaState::kRunning;
}

void AddReplica(JobRecord& job, int slot, bool replacement) {
  ReplicaRecord rep;
  rep.slot = slot;
  rep.replacement = replacement;
  job.replicas.push_back(std::move(rep));
}

}  // namespace

bool ControlPlane::ReplaceReplicas(JobRecord& job,
                                   const std::function<bool(const ReplicaRecord&)>& affected,
                                   const std::string& cause, bool planned, bool lost,
                                   StoreBatch& batch) {
  if (job.spec.RecoveryPolicy() != "failover" || job.state != JobState::kRunning ||
      job.cancel_requested) {
    return false;
  }
  std::vector<size_t> hit;
  int others = 0;
  for (size_t i = 0; i < job.replicas.size(); ++i) {
    const ReplicaRecord& rep = job.replicas[i];
    if (!rep.retire.empty() || Gone(rep)) continue;
    if (affected(rep)) {
      hit.push_back(i);
    } else {
      others += Serving(rep);
    }
  }
  if (hit.empty() || (others == 0 && !planned)) return false;
  json replaced = json::array();
  for (size_t i : hit) {
    ReplicaRecord& rep = job.replicas[i];
    rep.retire = cause;
    rep.planned = planned;
    if (lost) rep.state = ReplicaState::kLost;  // no evidence will come; devices are fenced
    // Never started: nothing to reclaim.
    if (rep.state == ReplicaState::kPending) rep.state = ReplicaState::kRetired;
    replaced.push_back({{"replica", i}, {"slot", rep.slot}, {"node", rep.node}});
  }
  for (const json& r : replaced) AddReplica(job, r["slot"].get<int>(), true);
  job.reason =
      absl::StrCat("failover: replacing ", hit.size(), " of ", job.spec.replicas,
                   " replicas after ", cause, planned ? "; each serves until replaced" : "");
  Event(batch, "scheduler", "job.failover", absl::StrCat("job/", job.id), job.reason,
        {{"replicas", replaced}, {"policy", "failover"}, {"cause", cause}, {"planned", planned}});
  Touch(job, batch);
  return true;
}

bool ControlPlane::DisplaceOn(JobRecord& job, const std::string& node, int gpu, int start,
                              const std::string& cause, bool planned, StoreBatch& batch) {
  auto on = [&](const ReplicaRecord& rep) { return Holds(rep, node, gpu, start); };
  if (ReplaceReplicas(job, on, cause, planned, false, batch)) return true;
  return Displace(job, cause, batch);
}

json ControlPlane::MoveOff(const std::string& node, int gpu, int start, const std::string& cause,
                           bool planned, StoreBatch& batch) {
  json jobs = json::array();
  std::set<std::string> queues, tenants;
  for (JobRecord* placed : jobs_.PlacedOn(node)) {  // a queued job holds no replica
    JobRecord& job = *placed;
    bool on = std::any_of(job.replicas.begin(), job.replicas.end(),
                          [&](const ReplicaRecord& rep) { return Holds(rep, node, gpu, start); });
    if (!on || !DisplaceOn(job, node, gpu, start, cause, planned, batch)) continue;
    jobs.push_back(job.id);
    queues.insert(job.spec.queue);
    tenants.insert(job.spec.tenant);
  }
  return {{"jobs", jobs}, {"queues", queues}, {"tenants", tenants}};
}

bool ControlPlane::MustStop(const JobRecord& job, const ReplicaRecord& rep) {
  if (rep.state == ReplicaState::kLost) return true;
  if (rep.retire.empty()) return false;
  if (!rep.planned) return true;
  return std::any_of(job.replicas.begin(), job.replicas.end(), [&](const ReplicaRecord& other) {
    return &other != &rep && other.slot == rep.slot && Serving(other);
  });
}

bool ControlPlane::QuarantineFailedChecks(const JobRecord& job, const ReplicaRecord& rep,
                                          StoreBatch& batch) {
  if (rep.reclaim.value("status", "") == "verified") return true;
  auto node = nodes_.find(rep.node);
  for (const json& c : rep.reclaim.value("checks", json::array())) {
    if (c.value("ok", true) || !c.contains("device") || node == nodes_.end()) continue;
    int device = c["device"];
    std::string why =
        absl::StrCat("job ", job.id, ": ", c.value("name", ""), ": ", c.value("observed", ""));
    node->second.quarantined[device] = why;
    batch.puts.push_back({"node", rep.node, node->second.ToJson().dump()});
    json details = c;  // the job that revealed it, and its tenant, for the audit trail
    details["job"] = job.id;
    details["tenant"] = job.spec.tenant;
    details["project"] = job.spec.project;
    // A timed-out or audited record (reclaim_evidence.h) is the scheduler's conclusion, not the
    // agent's report.
    const bool concluded =
        rep.reclaim.value("timed_out", false) || rep.reclaim.contains("reported_status");
    std::string actor = concluded ? "scheduler" : "agent:" + rep.node;
    Event(batch, actor, "device.quarantined", absl::StrCat("node/", rep.node, "/gpu/", device), why,
          details);
  }
  return false;
}

void ControlPlane::RetireUnplaced(JobRecord& job, const std::string& why) {
  // A job none of whose replicas was handed to an agent is ended by CancelUnstarted ("cancelled
  // before its processes started"); beside a started one, a replica placed but never handed to
  // its agent (a heartbeat sets assigned_us, durably, before the agent sees the assignment) has
  // no process, and a stopping job's pending replicas are never handed out: waiting for its
  // evidence would wait for ever.
  const bool started =
      std::any_of(job.replicas.begin(), job.replicas.end(), [](const ReplicaRecord& r) {
        return r.state != ReplicaState::kPending || r.assigned_us > 0;
      });
  for (ReplicaRecord& r : job.replicas) {
    const bool never_started = r.node.empty() || (started && r.assigned_us == 0);
    if (!never_started || r.state != ReplicaState::kPending) continue;
    r.state = ReplicaState::kRetired;
    if (r.retire.empty()) r.retire = why;
  }
}

void ControlPlane::Retire(JobRecord& job, int r, StoreBatch& batch) {
  ReplicaRecord& rep = job.replicas[r];
  rep.state = ReplicaState::kRetired;
  bool verified = QuarantineFailedChecks(job, rep, batch);
  Event(batch, "agent:" + rep.node, "job.replica-retired", absl::StrCat("job/", job.id),
        absl::StrCat("replica ", r, " (slot ", rep.slot, ") on ", rep.node, " stopped after ",
                     rep.retire, verified ? "; reclaim verified" : "; reclaim failed"),
        {{"replica", r}, {"slot", rep.slot}, {"reclaim", rep.reclaim}});
}

absl::StatusOr<json> ControlPlane::Scale(int64_t id, int replicas, const Principal& who) {
  if (replicas < 1 || replicas > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas: ", replicas, " is not between 1 and 1000"));
  }
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<JobRecord> done;
  JobRecord* live = jobs_.Find(id);
  if (live == nullptr) {
    if (absl::Status s = Ended(id, done); !s.ok()) return s;
  }
  JobRecord& job = done ? *done : *live;  // a finished job only answers why not
  if (job.spec.RecoveryPolicy() != "failover") {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not a service (recovery ",
                                                      job.spec.RecoveryPolicy(),
                                                      "); only failover jobs scale"));
  }
  if (job.state != JobState::kRunning || job.cancel_requested) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", Name(job.state), "; only a running service scales"));
  }
  for (size_t r = 0; r < job.replicas.size(); ++r) {
    if (job.replicas[r].retire.empty() && job.replicas[r].state == ReplicaState::kExited) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " is ending: its replica ", r, " exited (",
          EndCause(job.replicas[r], job.spec.memory), "); only a running service scales"));
    }
  }
  StoreBatch batch;
  int from = job.spec.replicas;
  std::string cause = absl::StrCat("scale from ", from, " to ", replicas, " by ", who.name);
  json removed = json::array();
  for (size_t i = 0; i < job.replicas.size(); ++i) {
    ReplicaRecord& rep = job.replicas[i];
    if (rep.slot < replicas || !rep.retire.empty() || Gone(rep)) continue;
    rep.retire = cause;
    if (rep.state == ReplicaState::kPending) rep.state = ReplicaState::kRetired;
    removed.push_back(i);
  }
  for (int slot = from; slot < replicas; ++slot) AddReplica(job, slot, false);
  job.spec.replicas = replicas;
  job.reason = cause;
  Event(batch, "user:" + who.name, "job.scaled", absl::StrCat("job/", id), cause,
        {{"from", from}, {"to", replicas}, {"stopping", removed}});
  Touch(job, batch);
  json out = job.ToJson();
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

void ControlPlane::PlaceReplica(JobRecord& job, size_t i, const ReplicaPlacement& p,
                                const Cluster& cluster, StoreBatch& batch) {
  ReplicaRecord placed = ToReplicaRecord(cluster, p);
  placed.slot = job.replicas[i].slot;
  placed.replacement = job.replicas[i].replacement;
  placed.log_base = LogSize(job, static_cast<int>(i));
  job.replicas[i] = std::move(placed);
  job.explanation.clear();
  job.explanation_reasons.clear();
  Event(batch, "scheduler", "job.replica-scheduled", absl::StrCat("job/", job.id),
        absl::StrCat("replica ", i, " (slot ", job.replicas[i].slot, ") placed on ",
                     job.replicas[i].node),
        {{"replica", i}, {"node", job.replicas[i].node}, {"queue", job.spec.queue}});
  Touch(job, batch);
}

void ControlPlane::ReplicaWaits(JobRecord& job, size_t i, Waiting& w, StoreBatch& batch) {
  const ReplicaRecord& rep = job.replicas[i];
  w.summary = absl::StrCat(rep.replacement ? "replacement of" : "scale-up", " replica slot ",
                           rep.slot, " waits: ", w.wait.Summary());
  w.extra = {{"explanation", w.summary}, {"replica", i}, {"slot", rep.slot}};
  if (job.explanation == w.summary) return;
  json explained = WaitToJson(w.wait);
  explained.update(w.extra);
  job.explanation = w.summary;
  job.explanation_reasons = explained["reasons"].get<std::map<std::string, int>>();
  Event(batch, "scheduler", "job.replica-waiting", absl::StrCat("job/", job.id), w.summary,
        {{"replica", i}, {"slot", rep.slot}, {"gates", explained["gates"]}, {"fix", w.wait.fix}});
  Touch(job, batch);
}

}  // namespace carve
