// One scheduling cycle of the control plane: liveness, then the pure core over the live state.
#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/sched/placement/placer.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

// The live nodes as the core's cluster; `ids` maps node names to cluster ids.
Cluster BuildCluster(const GpuCatalog* catalog, const std::map<std::string, NodeRecord>& nodes,
                     std::map<std::string, NodeId>& ids) {
  Cluster cluster(catalog);
  for (const auto& [name, rec] : nodes) {
    Node n;
    n.name = name;
    n.state = rec.state != "ready"       ? NodeState::kNotReady
              : !rec.cordoned_by.empty() ? NodeState::kCordoned
                                         : NodeState::kReady;
    n.capacity.cpu = CpuMilli(rec.cpu_milli);
    n.capacity.memory = MemMib(rec.memory_mib);
    for (const auto& [k, v] : rec.labels) n.labels[k] = v;
    if (auto pool = rec.labels.find("pool"); pool != rec.labels.end()) n.pool = pool->second;
    for (const DiscoveredGpu& g : rec.gpus) {
      Device d;
      d.model = *catalog->Find(g.model);  // checked at registration
      d.mode = ParseDeliveryMode(g.mode).value_or(DeliveryMode::kExclusive);
      d.health = g.health == "healthy"   ? DeviceHealth::kHealthy
                 : g.health == "suspect" ? DeviceHealth::kSuspect
                                         : DeviceHealth::kUnhealthy;
      d.dynamic_layout = g.dynamic_layout;
      if (rec.quarantined.count(g.index)) d.state = DeviceState::kQuarantined;
      if (rec.fenced.count(g.index) || rec.cordoned_gpus.count(g.index) ||
          rec.relayouts.count(g.index)) {
        d.state = DeviceState::kCordoned;
      }
      for (const DiscoveredMigInstance& m : g.mig_instances) {
        auto profile = catalog->FindProfile(d.model, m.profile);
        if (profile.ok()) d.instances.push_back({*profile, m.start, false, false});
      }
      n.devices.push_back(std::move(d));
    }
    ids[name] = cluster.AddNode(std::move(n));
  }
  return cluster;
}

std::vector<DeviceGrant> ToGrants(const Cluster& cluster, NodeId node,
                                  const std::vector<GrantRecord>& records) {
  std::vector<DeviceGrant> grants;
  for (const GrantRecord& g : records) {
    DeviceGrant d{g.device, GpuMilli(g.compute_milli), MemMib(g.memory_mib), -1, -1, false};
    if (!g.profile.empty()) {
      const Device& dev = cluster.node(node).devices[g.device];
      d.mig_profile = cluster.catalog().FindProfile(dev.model, g.profile).value_or(-1);
      d.mig_start = g.start;
      d.mig_created = g.created;
    }
    grants.push_back(d);
  }
  return grants;
}

}  // namespace

absl::StatusOr<int> ControlPlane::ScheduleOnce() {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return absl::UnavailableError("the server must be restarted");
  int64_t now = now_();
  StoreBatch batch;
  // Liveness: a silent node is not-ready and the replicas it ran are lost.
  for (auto& [name, node] : nodes_) {
    if (node.state != "ready" || now - node.last_heartbeat_us <= options_.node_timeout_us) continue;
    node.state = "not-ready";
    batch.puts.push_back({"node", name, node.ToJson().dump()});
    Event(batch, "scheduler", "node.not-ready", "node/" + name,
          absl::StrCat("no heartbeat for ", (now - node.last_heartbeat_us) / 1000, " ms"));
    NodeLost(node, now, batch);
  }
  // Leases that ran out: stop the job so its GPUs come back.
  for (auto& [id, job] : jobs_) {
    if (job.state != "running" || job.cancel_requested || job.lease_expires_us == 0 ||
        now <= job.lease_expires_us) {
      continue;
    }
    job.cancel_requested = true;
    job.cancelled_by = "the platform: its " + job.spec.Lease() + " lease expired unrenewed";
    job.reason = "stopping: lease expired";
    Event(batch, "scheduler", "job.lease-expired", absl::StrCat("job/", id), job.cancelled_by);
    Touch(job, batch);
  }
  // Cancelled before any replica started: nothing to stop.
  for (auto& [id, job] : jobs_) {
    if (IsFinal(job.state) || !job.cancel_requested) continue;
    bool started = std::any_of(job.replicas.begin(), job.replicas.end(),
                               [](const ReplicaRecord& r) { return r.state != "pending"; });
    if (started) continue;  // its end comes with the agents' reclaim evidence
    job.state = "cancelled";
    job.reason = "cancelled before its processes started";
    job.ended_us = now;
    Event(batch, "scheduler", "job.cancelled", absl::StrCat("job/", id), job.reason);
    Touch(job, batch);
  }

  std::map<std::string, NodeId> ids;
  Cluster cluster = BuildCluster(catalog_, nodes_, ids);
  Workload workload;
  std::map<int64_t, std::vector<ReplicaPlacement>> held;  // what each active job holds
  for (auto& [id, job] : jobs_) {
    if (IsFinal(job.state) || job.replicas.empty()) continue;
    auto request = ToJobRequest(job.spec, *catalog_);
    for (const ReplicaRecord& rep : job.replicas) {
      auto it = ids.find(rep.node);
      if (it == ids.end() || !request.ok()) continue;
      ReplicaPlacement p{it->second, request->replica.resources,
                         ToGrants(cluster, it->second, rep.grants)};
      ApplyReplica(cluster, p);
      held[id].push_back(std::move(p));
    }
  }
  for (auto& [id, job] : jobs_) {
    auto request = ToJobRequest(job.spec, *catalog_);
    if (request.ok()) workload.push_back({request->replica, 1.0});
  }
  for (WorkloadClass& w : workload) w.weight /= static_cast<double>(workload.size());
  auto policy = MakePolicy(options_.policy, PolicyOptions{workload});
  if (!policy.ok()) return policy.status();
  // Queues, quotas, order, preemption and placement: the core's cycle (control_plane_queues.cc).
  int scheduled = ScheduleQueued(cluster, held, **policy, now, batch);
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return scheduled;
}

}  // namespace carve
