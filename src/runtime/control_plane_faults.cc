// Faults and planned disruptions: node loss, drains, unhealthy devices, and recovery by policy.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

void ControlPlane::Recover(JobRecord& job, const std::string& cause, const std::string& fault_ref,
                           StoreBatch& batch) {
  std::string subject = absl::StrCat("job/", job.id);
  std::string policy = job.spec.RecoveryPolicy();
  std::string node = job.replicas.empty() ? "" : job.replicas[0].node;
  // A preempted job is requeued without spending a retry: it did nothing wrong.
  bool preempted = cause.rfind("preempted by ", 0) == 0;
  if (job.cancel_requested || policy == "none" ||
      (!preempted && job.attempt >= job.spec.MaxRetries())) {
    job.state = job.cancel_requested ? "cancelled" : preempted ? "preempted" : "failed";
    job.reason =
        absl::StrCat(cause, policy == "none" ? "; recovery policy none" : "; no retries left");
    job.ended_us = now_();
    Event(batch, "scheduler", "job." + job.state, subject, job.reason, {{"cause", fault_ref}});
    return;
  }
  json reclaim = json::array();
  for (const ReplicaRecord& r : job.replicas) reclaim.push_back(r.reclaim);
  job.attempts.push_back({{"attempt", job.attempt},
                          {"cause", cause},
                          {"node", node},
                          {"ended_us", now_()},
                          {"fault", fault_ref},
                          {"reclaim", reclaim}});
  ++job.attempt;
  job.state = "queued";
  job.replicas.clear();
  job.outcome.clear();
  job.displaced.clear();
  job.reason = absl::StrCat(policy, ": attempt ", job.attempt + 1, " after ", cause);
  Event(batch, "scheduler", policy == "failover" ? "job.failover" : "job.retrying", subject,
        job.reason, {{"attempt", job.attempt}, {"policy", policy}, {"cause", fault_ref}});
}

void ControlPlane::NodeLost(NodeRecord& node, int64_t now, StoreBatch& batch) {
  std::string fault = absl::StrCat("node ", node.name, " stopped heartbeating");
  for (auto& [id, job] : jobs_) {
    if (IsFinal(job.state)) continue;
    bool touched = false;
    for (const ReplicaRecord& r : job.replicas) {
      if (r.node != node.name) continue;
      touched = true;
      // Its processes may still run on the node: fence its devices until the node returns.
      for (const GrantRecord& g : r.grants) node.fenced[g.device] = id;
    }
    if (!touched) continue;
    Event(batch, "scheduler", "job.lost", absl::StrCat("job/", id), fault,
          {{"node", node.name}, {"attempt", job.attempt}});
    if (job.state == "reclaiming") {
      job.state = "lost";
      job.reason = fault + " before the evidence of its reclaim arrived";
      job.ended_us = now;
    } else {
      Recover(job, fault, "node.not-ready node/" + node.name, batch);
      if (job.state == "failed") job.state = "lost";
    }
    Touch(job, batch);
  }
  batch.puts.push_back({"node", node.name, node.ToJson().dump()});
}

bool ControlPlane::Displace(JobRecord& job, const std::string& cause, StoreBatch& batch) {
  if (IsFinal(job.state) || job.state == "queued" || job.state == "reclaiming") return false;
  bool started = false;
  for (const ReplicaRecord& r : job.replicas) started |= r.state != "pending";
  Event(batch, "scheduler", "job.displaced", absl::StrCat("job/", job.id), cause);
  if (!started) {
    Recover(job, cause, cause, batch);  // nothing ran yet: queue it again at once
  } else {
    job.displaced = cause;
    job.reason = "stopping: " + cause;
  }
  Touch(job, batch);
  return true;
}

absl::StatusOr<json> ControlPlane::Cordon(const std::string& name, const std::string& action,
                                          int gpu, const Principal& who) {
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
    for (auto& [id, job] : jobs_) {
      if (job.Uses(name, gpu) && Displace(job, cause, batch)) moved.push_back(id);
    }
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

void ControlPlane::DeviceHealth(NodeRecord& node, const json& gpus, StoreBatch& batch) {
  for (const json& g : gpus) {
    int index = g.value("index", -1);
    if (index < 0 || index >= static_cast<int>(node.gpus.size())) continue;
    DiscoveredGpu& gpu = node.gpus[index];
    std::string health = g.value("health", "healthy");
    std::string why = g.value("health_reason", "");
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
    json jobs = json::array();
    std::set<std::string> queues, tenants;
    for (auto& [id, job] : jobs_) {
      if (!job.Uses(node.name, index) || !Displace(job, cause, batch)) continue;
      jobs.push_back(id);
      queues.insert(job.spec.queue);
      tenants.insert(job.spec.tenant);
    }
    Event(batch, "agent:" + node.name, "device." + health, subject, cause,
          {{"jobs", jobs}, {"queues", queues}, {"tenants", tenants}, {"reason", why}});
  }
}

}  // namespace carve
