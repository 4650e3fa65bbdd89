// Faults and planned disruptions: node loss, drains, unhealthy devices, and recovery by policy.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

void ControlPlane::Recover(JobRecord& job, std::string cause, std::string fault_ref,
                           StoreBatch& batch) {
  std::string subject = absl::StrCat("job/", job.id);
  std::string policy = job.spec.RecoveryPolicy();
  std::string node = job.replicas.empty() ? "" : job.replicas[0].node;
  // A preempted job is requeued without spending a retry: it did nothing wrong.
  bool preempted = cause.rfind("preempted by ", 0) == 0;
  if (job.cancel_requested || policy == "none" ||
      (!preempted && job.attempt >= job.spec.MaxRetries())) {
    job.state = job.cancel_requested ? JobState::kCancelled
                : preempted          ? JobState::kPreempted
                                     : JobState::kFailed;
    job.reason =
        absl::StrCat(cause, policy == "none" ? "; recovery policy none" : "; no retries left");
    job.ended_us = now_();
    Event(batch, "scheduler", absl::StrCat("job.", Name(job.state)), subject, job.reason,
          {{"cause", fault_ref}});
    return;
  }
  AttemptRecord ended{job.attempt, cause, node, job.scheduled_us, now_(), {}, fault_ref};
  for (const ReplicaRecord& r : job.replicas) {  // what it held, for its usage row
    ended.replicas.push_back({r.node, r.grants, r.versions});
    ended.reclaim.push_back(r.reclaim);
  }
  job.attempts.push_back(std::move(ended));
  ++job.attempt;
  job.state = JobState::kQueued;
  job.replicas.clear();
  // Its usage row is written now, not recomputed until the job ends.
  for (const json& row : UsageRows(job, now_(), job.attempt - 1)) {
    batch.puts.push_back({"usage", UsageRowId(row), row.dump()});
  }
  job.outcome.reset();
  job.displaced.clear();
  job.reason = absl::StrCat(policy, ": attempt ", job.attempt + 1, " after ", cause);
  if (policy == "checkpoint-retry") {  // back off: 1 s, 2 s, 4 s, ... at most a minute
    int64_t backoff = int64_t{1'000'000} << std::min(job.attempt - 1, 6);
    job.not_before_us = now_() + std::min<int64_t>(backoff, 60'000'000);
    absl::StrAppend(&job.reason, "; retries after a ", backoff / 1'000'000, " s backoff");
  }
  Event(batch, "scheduler", policy == "failover" ? "job.failover" : "job.retrying", subject,
        job.reason, {{"attempt", job.attempt}, {"policy", policy}, {"cause", fault_ref}});
}

namespace {

// The margin between an agent's promise to have stopped its replicas and the loss of its jobs:
// the agent counts its silence from when it sent its last answered heartbeat (before the server
// read it), and stops each replica within its grace; this covers its fence check's period (100
// ms), the wait after SIGKILL for the group to empty (2 s) and a loaded machine.
constexpr int64_t kFenceMarginUs = 3'000'000;

}  // namespace

int64_t ControlPlane::SilenceBeforeLoss(const NodeRecord& node) const {
  int64_t silence = options_.node_timeout_us + options_.lost_after_us;
  if (node.fence_after_ms > 0) {
    // New attempts start only once the agent has surely stopped the old ones.
    silence =
        std::max(silence, (node.fence_after_ms + node.fence_grace_ms) * 1000 + kFenceMarginUs);
  }
  return silence;
}

void ControlPlane::Liveness(int64_t now, StoreBatch& batch) {
  for (auto& [name, node] : nodes_) {
    int64_t silent = now - node.last_heartbeat_us;
    if (node.state == NodeRecordState::kReady && silent > options_.node_timeout_us) {
      node.state = NodeRecordState::kNotReady;
      batch.puts.push_back({"node", name, node.ToJson().dump()});
      Event(batch, "scheduler", "node.not-ready", "node/" + name,
            absl::StrCat("no heartbeat for ", silent / 1000, " ms; its jobs are lost after ",
                         SilenceBeforeLoss(node) / 1000, " ms of silence"));
    }
    if (node.state == NodeRecordState::kNotReady && node.lost_us == 0 &&
        silent > SilenceBeforeLoss(node)) {
      node.lost_us = now;
      NodeLost(node, now, batch);
    }
  }
}

void ControlPlane::FencedItself(const NodeRecord& node, int64_t lost_us,
                                const HeartbeatRequest& beat, StoreBatch& batch) {
  json replicas = json::array();
  bool before = true;
  for (const ReplicaReport& r : beat.replicas) {
    if (!r.fenced_us) continue;
    replicas.push_back({{"job", r.job}, {"replica", r.replica}, {"fenced_us", *r.fenced_us}});
    before = before && (lost_us == 0 || *r.fenced_us < lost_us);
  }
  if (replicas.empty()) return;
  std::string reason = absl::StrCat(
      "its agent says it began stopping ", replicas.size(), " replica(s) itself after ",
      node.fence_after_ms, " ms without an answer, ",
      lost_us == 0 ? "before their jobs were declared lost"
      : before     ? "before the server declared them lost (by the node's clock against the "
                     "server's)"
                   : "but not all before the server declared them lost (by the node's clock "
                     "against the server's)");
  Event(batch, "agent:" + node.name, "node.fenced-itself", "node/" + node.name, reason,
        {{"replicas", replicas}, {"lost_us", lost_us}, {"before_lost", before}});
}

absl::StatusOr<json> ControlPlane::DeclareDead(const std::string& name, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kOperate); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError("no node \"" + name + "\"");
  NodeRecord& node = it->second;
  if (node.state == NodeRecordState::kReady) {
    return absl::FailedPreconditionError("node " + name +
                                         " is heartbeating; drain it instead of declaring it dead");
  }
  StoreBatch batch;
  int64_t now = now_();
  if (node.lost_us == 0) {
    node.lost_us = now;
    NodeLost(node, now, batch);
  }
  json unfenced = json::array();
  for (const auto& [gpu, job] : node.fenced) unfenced.push_back({{"gpu", gpu}, {"job", job}});
  node.fenced.clear();
  node.state = NodeRecordState::kDead;
  batch.puts.push_back({"node", name, node.ToJson().dump()});
  Event(batch, "user:" + who.name, "node.declared-dead", "node/" + name,
        "declared dead by " + who.name + "; its devices are unfenced on that word",
        {{"unfenced", unfenced}});
  json out = node.ToJson();
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

void ControlPlane::NodeLost(NodeRecord& node, int64_t now, StoreBatch& batch) {
  std::string fault = absl::StrCat("node ", node.name, " stopped heartbeating");
  json radius = {{"jobs", json::array()}, {"fenced", json::array()}};
  for (JobRecord* placed : jobs_.PlacedOn(node.name)) {
    JobRecord& job = *placed;
    const int64_t id = job.id;
    if (IsFinal(job.state)) continue;
    bool touched = false;
    for (const ReplicaRecord& r : job.replicas) {
      if (r.node != node.name || r.state == ReplicaState::kRetired ||
          r.state == ReplicaState::kLost) {
        continue;
      }
      touched = true;
      // Its processes may still run on the node: fence its devices until the node returns.
      for (const GrantRecord& g : r.grants) node.fenced[g.device] = id;
    }
    if (!touched) continue;
    radius["jobs"].push_back(id);
    auto on_node = [&](const ReplicaRecord& r) { return r.node == node.name; };
    if (ReplaceReplicas(job, on_node, fault, false, true, batch)) continue;  // the others serve
    Event(batch, "scheduler", "job.lost", absl::StrCat("job/", id), fault,
          {{"node", node.name}, {"attempt", job.attempt}});
    if (job.state == JobState::kReclaiming) {
      job.state = JobState::kLost;
      job.reason = fault + " before the evidence of its reclaim arrived";
      job.ended_us = now;
    } else {
      Recover(job, fault, "node.not-ready node/" + node.name, batch);
      if (job.state == JobState::kFailed) job.state = JobState::kLost;
    }
    Touch(job, batch);
  }
  for (const auto& [gpu, job] : node.fenced) radius["fenced"].push_back(gpu);
  // The agent's promise, not yet its word: whether it kept it is known when it returns
  // (node.fenced-itself); until then its devices stay fenced.
  if (node.fence_after_ms > 0) {
    radius["self_fence"] = {{"after_ms", node.fence_after_ms}, {"grace_ms", node.fence_grace_ms}};
    absl::StrAppend(&fault, "; its agent promised to stop them itself after ", node.fence_after_ms,
                    " ms without an answer (unconfirmed until it returns)");
  } else {
    absl::StrAppend(&fault,
                    "; its processes may still run there (its agent does not fence "
                    "itself: carve agent --fence-after-ms)");
  }
  // The blast radius in one event: every job that had a replica there.
  Event(batch, "scheduler", "node.lost", "node/" + node.name, fault, radius);
  batch.puts.push_back({"node", node.name, node.ToJson().dump()});
}

bool ControlPlane::Displace(JobRecord& job, const std::string& cause, StoreBatch& batch) {
  if (IsFinal(job.state) || job.state == JobState::kQueued || job.state == JobState::kReclaiming) {
    return false;
  }
  // Handed to an agent, a replica may run, reported or not (as CancelUnstarted judges): its
  // attempt ends with the agent's report. Requeued at once, the job could be placed on the same
  // node again, and the old process's exit and reclaim were applied to the new replica (it
  // failed a job that never ran and quarantined a GPU it never used; red team, 2026-12-04).
  bool started = false;
  for (const ReplicaRecord& r : job.replicas) {
    started |= r.state != ReplicaState::kPending || r.assigned_us > 0;
  }
  Event(batch, "scheduler", "job.displaced", absl::StrCat("job/", job.id), cause);
  if (!started) {
    Recover(job, cause, cause, batch);  // nothing ran yet: queue it again at once
  } else {
    job.displaced = cause;
    job.reason = "stopping: " + cause;
    // A stopping job's pending replicas are never handed out: one placed (or waiting) but not yet
    // handed to its agent would keep the job from ending, and from being queued again.
    RetireUnplaced(job, "the job was displaced (" + cause + ") before the replica was started");
  }
  Touch(job, batch);
  return true;
}

absl::StatusOr<json> ControlPlane::Cordon(const std::string& name, const std::string& action,
                                          int gpu, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kOperate); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError("no node \"" + name + "\"");
  NodeRecord& node = it->second;
  if (gpu >= static_cast<int>(node.gpus.size())) {
    return absl::InvalidArgumentError(absl::StrCat("node ", name, " has no GPU ", gpu));
  }
  StoreBatch batch;
  json moved = json::array();
  std::string by = action == "drain" ? who.name + " (drain)" : who.name;
  if (gpu >= 0) {
    if (action == "uncordon") {
      node.cordoned_gpus.erase(gpu);
    } else {
      node.cordoned_gpus[gpu] = by;
    }
  } else if (action == "uncordon") {
    node.cordoned_by.clear();
    node.cordoned_gpus.clear();
  } else {
    node.cordoned_by = by;
  }
  std::string target = gpu >= 0 ? absl::StrCat("GPU ", gpu, " of node ", name) : "node " + name;
  if (action == "drain") {
    std::string cause = absl::StrCat("drain of ", target, " by ", who.name);
    moved = MoveOff(name, gpu, -1, cause, true, batch)["jobs"];
  }
  batch.puts.push_back({"node", name, node.ToJson().dump()});
  std::string type = action == "drain" ? "node.drained" : "node." + action + "ed";
  Event(batch, "user:" + who.name, type,
        gpu >= 0 ? absl::StrCat("node/", name, "/gpu/", gpu) : "node/" + name,
        action == "drain"
            ? absl::StrCat("no new work on ", target, "; ", moved.size(), " jobs moved by policy")
        : action == "cordon" ? "no new work on " + target
                             : target + " back in service",
        {{"jobs", moved}});
  json out = node.ToJson();
  out["jobs_moved"] = moved;
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

void ControlPlane::DeviceHealth(NodeRecord& node, const std::vector<GpuReport>& gpus,
                                StoreBatch& batch) {
  for (const GpuReport& g : gpus) {
    const int index = g.index;
    if (index < 0 || index >= static_cast<int>(node.gpus.size())) continue;
    DiscoveredGpu& gpu = node.gpus[index];
    const std::string health(HealthName(g.health));
    const std::string& why = g.health_reason;
    // Whether its shares' caps are enforced (an MPS daemon runs): the node record says so.
    std::string enforcement = g.share_enforcement.value_or(gpu.share_enforcement);
    if (enforcement != gpu.share_enforcement) {
      gpu.share_enforcement = enforcement;
      batch.puts.push_back({"node", node.name, node.ToJson().dump()});
    }
    if (health == gpu.health && why == gpu.health_reason) continue;
    gpu.health = health;
    gpu.health_reason = why;
    batch.puts.push_back({"node", node.name, node.ToJson().dump()});
    std::string subject = absl::StrCat("node/", node.name, "/gpu/", index);
    if (health == "healthy") {
      Event(batch, "agent:" + node.name, "device.healthy", subject, "the device reports healthy");
      continue;
    }
    // The blast radius: only the jobs on this device.
    std::string cause = absl::StrCat("GPU ", index, " of ", node.name, " is ", health,
                                     why.empty() ? "" : ": " + why);
    json radius = MoveOff(node.name, index, -1, cause, false, batch);
    radius["reason"] = why;
    Event(batch, "agent:" + node.name, "device." + health, subject, cause, radius);
  }
}

}  // namespace carve
