// One scheduling cycle of the control plane: liveness, then the pure core over the live state.
#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/sched/placement/placer.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

// A partition GPU's instances. On a dynamic GPU they are the grants' (created per replica).
void AddInstances(const GpuCatalog& catalog, const DiscoveredGpu& g, Device& d) {
  if (g.dynamic_layout) return;
  for (const DiscoveredMigInstance& m : g.mig_instances) {
    auto profile = catalog.FindProfile(d.model, m.profile);
    if (profile.ok()) d.instances.push_back({*profile, m.start, false, false});
  }
}

// Faulty MIG instances take no work: occupied whether or not a job still holds them.
void BlockFaultyInstances(Cluster& cluster, const std::map<std::string, NodeRecord>& nodes,
                          const std::map<std::string, NodeId>& ids) {
  for (const auto& [name, rec] : nodes) {
    Node& node = cluster.mutable_node(ids.at(name));
    for (const auto& [key, fault] : rec.instance_faults) {
      std::vector<std::string> parts = absl::StrSplit(key, '/');
      int gpu = 0, start = 0;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &gpu) ||
          !absl::SimpleAtoi(parts[1], &start) || gpu >= static_cast<int>(node.devices.size())) {
        continue;
      }
      Device& d = node.devices[gpu];
      auto profile = cluster.catalog().FindProfile(d.model, fault.value("profile", ""));
      bool found = false;
      for (MigInstance& m : d.instances) {
        if (m.start == start) m.allocated = found = true;
      }
      if (!found && profile.ok()) d.instances.push_back({*profile, start, true, true});
    }
  }
}

// The live nodes as the core's cluster; `ids` maps node names to cluster ids.
Cluster BuildCluster(const GpuCatalog* catalog, const std::map<std::string, NodeRecord>& nodes,
                     std::map<std::string, NodeId>& ids) {
  Cluster cluster(catalog);
  for (const auto& [name, rec] : nodes) {
    Node n;
    n.name = name;
    std::string window = rec.maintenance.is_object() ? rec.maintenance.value("phase", "") : "";
    n.state = rec.state != "ready"                             ? NodeState::kNotReady
              : !rec.cordoned_by.empty() || window == "active" ? NodeState::kCordoned
                                                               : NodeState::kReady;
    if (window == "scheduled") {  // only jobs that end before it starts (TolerateWindows)
      n.taints.push_back(
          {"carve.io/maintenance", std::to_string(rec.maintenance.value("start_us", int64_t{0}))});
    }
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
      d.share_caps_enforced = g.share_enforcement.rfind("none", 0) != 0;
      if (rec.quarantined.count(g.index)) d.state = DeviceState::kQuarantined;
      if (rec.fenced.count(g.index) || rec.cordoned_gpus.count(g.index) ||
          rec.relayouts.count(g.index)) {
        d.state = DeviceState::kCordoned;
      }
      AddInstances(*catalog, g, d);
      n.devices.push_back(std::move(d));
    }
    ids[name] = cluster.AddNode(std::move(n));
  }
  return cluster;
}

std::vector<DeviceGrant> ToGrants(const Cluster& cluster, NodeId node,
                                  const std::vector<GrantRecord>& records,
                                  const std::string& share_group) {
  std::vector<DeviceGrant> grants;
  for (const GrantRecord& g : records) {
    DeviceGrant d{g.device, GpuMilli(g.compute_milli), MemMib(g.memory_mib), -1, -1, false};
    if (g.profile.empty() && g.compute_milli < kWholeGpu.units()) d.share_group = share_group;
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

ReplicaRecord ControlPlane::ToReplicaRecord(const Cluster& cluster,
                                            const ReplicaPlacement& p) const {
  ReplicaRecord rep;
  const Node& n = cluster.node(p.node);
  rep.node = n.name;
  for (const DeviceGrant& g : p.grants) {
    GrantRecord gr{g.device, g.compute.units(), g.memory.units(), "", -1, false};
    if (g.mig_profile >= 0) {
      gr.profile = catalog_->model(n.devices[g.device].model).mig_profiles[g.mig_profile].name;
      gr.start = g.mig_start;
      gr.created = g.mig_created;
    }
    rep.grants.push_back(gr);
  }
  return rep;
}

absl::StatusOr<int> ControlPlane::ScheduleOnce() {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return Broken();
  int64_t now = now_();
  StoreBatch batch;
  Liveness(now, batch);
  Timers(now, batch);  // leases, idle GPUs, maintenance windows
  ReclaimTimeouts(now, batch);
  // Cancelled before any replica started: nothing to stop.
  for (int64_t id : ActiveIds()) {
    JobRecord& job = jobs_.at(id);
    if (IsFinal(job.state) || !job.cancel_requested) continue;
    bool started =
        std::any_of(job.replicas.begin(), job.replicas.end(), [](const ReplicaRecord& r) {
          // handed to an agent: it may run, reported or not
          return r.state != "pending" || r.assigned_us > 0;
        });
    if (started) continue;  // its end comes with the agents' reclaim evidence
    job.state = "cancelled";
    job.reason = "cancelled before its processes started";
    job.ended_us = now;
    Event(batch, "scheduler", "job.cancelled", absl::StrCat("job/", id), job.reason);
    Touch(job, batch);
  }

  std::map<std::string, NodeId> ids;
  Cluster cluster = BuildCluster(catalog_, nodes_, ids);
  std::map<int64_t, std::vector<ReplicaPlacement>> held;  // what each active job holds
  for (int64_t id : ActiveIds()) {
    JobRecord& job = jobs_.at(id);
    if (IsFinal(job.state) || job.replicas.empty()) continue;
    auto request = ToJobRequest(job.spec, *catalog_);
    for (const ReplicaRecord& rep : job.replicas) {
      auto it = ids.find(rep.node);
      if (it == ids.end() || !request.ok() || rep.state == "retired") continue;
      ReplicaPlacement p{it->second, request->replica.resources,
                         ToGrants(cluster, it->second, rep.grants, request->replica.share_group)};
      ApplyReplica(cluster, p);
      held[id].push_back(std::move(p));
    }
  }
  BlockFaultyInstances(cluster, nodes_, ids);
  // Every job ever submitted, by request (kept at submission, not rebuilt per cycle).
  Workload workload = workload_;
  double submitted = 0;
  for (const WorkloadClass& w : workload) submitted += w.weight;
  for (WorkloadClass& w : workload) w.weight /= submitted;
  auto policy = MakePolicy(options_.policy, PolicyOptions{workload});
  if (!policy.ok()) return policy.status();
  // Queues, quotas, order, preemption and placement: the core's cycle (control_plane_queues.cc),
  // over queued jobs and the unplaced replicas of running services alike.
  int scheduled = ScheduleQueued(cluster, held, **policy, now, batch);
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return scheduled;
}

}  // namespace carve
