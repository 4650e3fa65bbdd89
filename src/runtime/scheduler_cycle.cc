// One scheduling cycle of the control plane: liveness, then the pure core over the live state.
#include <algorithm>
#include <initializer_list>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/sched/placement/placer.h"
#include "runtime/control_plane.h"
#include "runtime/cycle_plan.h"
#include "runtime/log.h"
#include "runtime/reservations.h"

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
void BlockFaultyInstances(const GpuCatalog& catalog, const NodeRecord& rec, Node& node) {
  for (const auto& [slot, fault] : rec.instance_faults) {
    const auto [gpu, start] = slot;
    if (gpu < 0 || gpu >= static_cast<int>(node.devices.size())) continue;
    Device& d = node.devices[gpu];
    auto profile = catalog.FindProfile(d.model, fault.profile);
    bool found = false;
    for (MigInstance& m : d.instances) {
      if (m.start == start) m.allocated = found = true;
    }
    if (!found && profile.ok()) d.instances.push_back({*profile, start, true, true});
  }
}

Device DeviceFromRecord(const GpuCatalog& catalog, const NodeRecord& rec, const DiscoveredGpu& g) {
  Device d;
  d.model = *catalog.Find(g.model);  // checked at registration
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
  AddInstances(catalog, g, d);
  return d;
}

// The node as a bind must find it: its record, faulty instances blocked, no job's holdings.
Node BaseNode(const GpuCatalog& catalog, const std::string& name, const NodeRecord& rec,
              const std::vector<PoolSelector>& pools, const ReservationView& reservations) {
  Cluster one(&catalog);
  NodeId id = one.AddNode(reservations.Build(catalog, name, rec, pools));
  BlockFaultyInstances(catalog, rec, one.mutable_node(id));
  return one.node(id);
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

Node NodeFromRecord(const GpuCatalog& catalog, const std::string& name, const NodeRecord& rec,
                    const std::vector<PoolSelector>& pools, const std::vector<Taint>& taints) {
  Node n;
  n.name = name;
  const std::optional<MaintenanceWindow>& window = rec.maintenance;
  bool in_window = window && window->phase == WindowPhase::kActive;
  n.state = rec.state != NodeRecordState::kReady    ? NodeState::kNotReady
            : !rec.cordoned_by.empty() || in_window ? NodeState::kCordoned
                                                    : NodeState::kReady;
  if (window && window->phase == WindowPhase::kScheduled) {
    // Only jobs that end before it starts (TolerateWindows).
    n.taints.push_back({"carve.io/maintenance", std::to_string(window->start_us)});
  }
  n.taints.insert(n.taints.end(), taints.begin(), taints.end());
  n.capacity.cpu = CpuMilli(rec.cpu_milli);
  n.capacity.memory = MemMib(rec.memory_mib);
  for (const auto& [name, amount] : rec.extra) n.capacity.extra.push_back({name, amount});
  for (const auto& [k, v] : rec.labels) n.labels[k] = v;
  n.pool = PoolOf(rec.labels, pools);
  for (const DiscoveredGpu& g : rec.gpus) n.devices.push_back(DeviceFromRecord(catalog, rec, g));
  return n;
}

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

// Cancelled before any replica started: nothing to stop.
void ControlPlane::CancelUnstarted(int64_t now, StoreBatch& batch) {
  for (JobRecord* placed : jobs_.Placed()) {
    JobRecord& job = *placed;
    const int64_t id = job.id;
    if (IsFinal(job.state) || !job.cancel_requested) continue;
    bool started =
        std::any_of(job.replicas.begin(), job.replicas.end(), [](const ReplicaRecord& r) {
          // handed to an agent: it may run, reported or not
          return r.state != ReplicaState::kPending || r.assigned_us > 0;
        });
    if (started) continue;  // its end comes with the agents' reclaim evidence
    job.state = JobState::kCancelled;
    job.reason = "cancelled before its processes started";
    job.ended_us = now;
    Event(batch, "scheduler", "job.cancelled", absl::StrCat("job/", id), job.reason);
    Touch(job, batch);
  }
}

absl::StatusOr<int> ControlPlane::ScheduleOnce() {
  std::lock_guard<std::mutex> one_cycle(schedule_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return Broken();
  CyclePlan plan(catalog_);
  plan.now = now_();
  StoreBatch batch;
  Liveness(plan.now, batch);
  Timers(plan.now, batch);  // leases, idle GPUs, maintenance windows
  ReclaimTimeouts(plan.now, batch);
  CancelUnstarted(plan.now, batch);
  if (options_.while_locked) options_.while_locked();
  // What the timers changed is committed, and calls answered, before the plan is read.
  if (absl::Status s = Breathe(lock, batch, "timers"); !s.ok()) return s;
  if (absl::Status s = PlanCycle(lock, plan, batch); !s.ok()) return s;
  if (!plan.policy) return absl::InternalError("no placement policy " + options_.policy);
  // What reading the plan changed (a placed service's stale explanation) is committed before the
  // plan is applied (Durable lets go of the lock while it waits); the core plans meanwhile, on
  // the copy, without the lock.
  if (!batch.empty()) {
    if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  } else {
    lock.unlock();
  }
  plan.in.cluster = &plan.cluster;
  plan.in.policy = plan.policy.get();
  if (options_.while_planning) options_.while_planning();
  Decisions d = Schedule(plan.in);
  TableWaits(plan, d);
  lock.lock();
  if (broken_) return Broken();
  StoreBatch applied;
  int scheduled = ApplyPlan(plan, d, applied);
  if (absl::Status s = RecordWaits(lock, plan, d, applied); !s.ok()) return s;
  if (absl::Status s = Durable(lock, std::move(applied)); !s.ok()) return s;
  return scheduled;
}

absl::Status ControlPlane::PlanCycle(std::unique_lock<std::mutex>& lock, CyclePlan& plan,
                                     StoreBatch& batch) {
  Cluster nodes(catalog_);
  const std::vector<PoolSelector> pools = config_.Pools();
  const ReservationView reservations(config_.Reservations(), nodes_, pools, plan.now, *catalog_);
  for (const auto& [name, rec] : nodes_) {
    plan.ids[name] = nodes.AddNode(reservations.Build(*catalog_, name, rec, pools));
  }
  plan.base = nodes;
  for (const auto& [name, rec] : nodes_) {
    BlockFaultyInstances(*catalog_, rec, plan.base.mutable_node(plan.ids.at(name)));
  }
  plan.nodes_changed = !memory_.base || !(*memory_.base == plan.base);
  Released released;
  ReadHoldings(plan, std::move(nodes), released);
  // Every job ever submitted, by request (kept at submission, not rebuilt per cycle).
  Workload workload = workload_;
  double submitted = 0;
  for (const WorkloadClass& w : workload) submitted += w.weight;
  for (WorkloadClass& w : workload) w.weight /= submitted;
  auto policy = MakePolicy(options_.policy, PolicyOptions{workload});
  if (policy.ok()) plan.policy = *std::move(policy);
  plan.config_revision = config_.revision();
  // Queues, quotas, order, preemption and placement: the core's cycle (control_plane_queues.cc),
  // over queued jobs and the unplaced replicas of running services alike.
  return PlanWork(lock, plan, released, batch);
}

std::vector<ReplicaPlacement> ControlPlane::HeldBy(const CyclePlan& plan,
                                                   const JobRecord& job) const {
  std::vector<ReplicaPlacement> held;
  const JobRequest* request = jobs_.RequestOf(job);
  if (request == nullptr) return held;
  for (const ReplicaRecord& rep : job.replicas) {
    auto it = plan.ids.find(rep.node);
    if (it == plan.ids.end() || rep.state == ReplicaState::kRetired) continue;
    held.push_back({it->second, request->replica.resources,
                    ToGrants(plan.base, it->second, rep.grants, request->replica.share_group),
                    request->replica.app});
  }
  return held;
}

void ControlPlane::ReadHoldings(CyclePlan& plan, Cluster nodes, Released& released) {
  // Taken whatever happens next (Remember gives them back): after a cycle that failed or was void
  // there is nothing to take, and the next cycle is full.
  Holdings last = std::exchange(memory_.held, {});
  std::optional<Cluster> kept = std::exchange(memory_.cluster, std::nullopt);
  if (!kept) memory_.valid = false;
  plan.cluster_kept = memory_.valid && !plan.nodes_changed;
  plan.cluster = plan.cluster_kept ? *std::move(kept) : std::move(nodes);
  std::set<int64_t> touched;  // nodes whose holdings changed (a kept cluster's)
  auto apply = [&](const std::vector<ReplicaPlacement>& placements, bool add) {
    for (const ReplicaPlacement& p : placements) {
      add ? ApplyReplica(plan.cluster, p) : ReleaseReplica(plan.cluster, p);
      touched.insert(p.node.value());
    }
  };
  for (const auto& [id, live] : jobs_.placed()) {
    const JobRecord* job = live.job;
    const uint64_t revision = live.revision;
    auto was = last.find(id);
    if (plan.cluster_kept && was != last.end() && revision != 0 &&
        was->second.revision == revision) {  // unchanged since the last cycle read it
      plan.held.emplace(id, std::move(was->second));
      last.erase(was);
      continue;
    }
    Holding now{HeldBy(plan, *job), job->spec.queue, revision};
    if (!plan.cluster_kept || was == last.end()) {
      apply(now.placements, true);
    } else if (!SameHoldings(was->second.placements, now.placements)) {
      apply(was->second.placements, false);
      apply(now.placements, true);
      // What it gave back was also charged to its queue's quota.
      if (ReleasedNodes(was->second.placements, now.placements, released.nodes)) {
        released.queues.insert(was->second.queue);
      }
    }
    if (was != last.end()) last.erase(was);
    if (!now.placements.empty()) plan.held.emplace(id, std::move(now));
  }
  if (plan.cluster_kept) {
    for (const auto& [id, gone] : last) {  // ended, or back in the queue
      apply(gone.placements, false);
      if (ReleasedNodes(gone.placements, {}, released.nodes)) released.queues.insert(gone.queue);
    }
  }
  for (const auto& [name, rec] : nodes_) {
    NodeId node = plan.ids.at(name);
    if (!plan.cluster_kept || touched.count(node.value())) {
      BlockFaultyInstances(*catalog_, rec, plan.cluster.mutable_node(node));
    }
  }
  if (plan.cluster_kept &&
      (options_.check_kept_cluster || memory_.FullDue(plan.now, options_.full_cycle_every_us))) {
    CheckKeptCluster(plan, std::move(nodes));  // unused by a kept cluster
  }
}

// The kept cluster against one built from every record (Kubernetes' scheduler cache comparer):
// a difference is a bug (a change to a job's holdings that did not raise its revision), logged,
// counted, and the rebuilt cluster is planned on.
void ControlPlane::CheckKeptCluster(CyclePlan& plan, Cluster fresh) {
  for (const auto& [id, live] : jobs_.placed()) {
    for (const ReplicaPlacement& p : HeldBy(plan, *live.job)) ApplyReplica(fresh, p);
  }
  for (const auto& [name, rec] : nodes_) {
    BlockFaultyInstances(*catalog_, rec, fresh.mutable_node(plan.ids.at(name)));
  }
  // Replicas by node (PlacedOn) name every placed job's nodes.
  for (const auto& [id, live] : jobs_.placed()) {
    for (const ReplicaRecord& r : live.job->replicas) {
      if (r.node.empty() || jobs_.IndexedOn(id, r.node)) continue;
      ++kept_cluster_drift_;
      LogError("scheduler: job ", id, " has a replica on node ", r.node,
               " that the index of replicas by node does not name");
    }
  }
  std::string node = HoldingsDiffer(plan.cluster, fresh);
  if (node.empty()) return;
  ++kept_cluster_drift_;
  LogError("scheduler: the cluster kept between cycles differs on node ", node,
           " from the one the job records give; planning on the rebuilt one");
  plan.cluster = std::move(fresh);
}

void ControlPlane::Remember(CyclePlan& plan, const Decisions& d) {
  // An incremental cycle says why when the reservation passed on (more parked jobs came back).
  std::string why = plan.incremental && plan.reopened ? "the reservation passed on" : plan.full_why;
  last_cycle_ = {plan.now,
                 !plan.incremental,
                 why,
                 plan.in.pending.size(),
                 plan.parked,
                 plan.explain.size(),
                 plan.cluster_kept,
                 kept_cluster_drift_};
  // A decision found stale (a job cancelled, a node cordoned meanwhile) left the cluster other
  // than the waiting jobs were judged on: the next cycle judges them all again.
  memory_.valid = plan.skipped == 0;
  if (!memory_.valid) return;
  if (!plan.incremental) {
    memory_.full_us = now_();
    memory_.full_took_us = memory_.full_us - plan.now;
    memory_.parked.clear();
    memory_.shapes.clear();
    memory_.shape_index.clear();
  }
  memory_.config_revision = plan.config_revision;
  memory_.stopping = std::move(plan.stopping);
  for (const Bind& b : d.binds) {  // what the next cycle must find held (read again then)
    int64_t id = b.job < 0 ? plan.work[-b.job - 1].job : b.job;
    Holding& held = plan.held[id];
    held.placements.insert(held.placements.end(), b.replicas.begin(), b.replicas.end());
    // The job may have ended and left memory since it was bound (between slices of the
    // explanations): the next cycle releases what it holds, charged to the queue it was planned
    // in.
    if (const JobRecord* job = jobs_.Find(id); job != nullptr) {
      held.queue = job->spec.queue;
    } else if (auto p = std::find_if(plan.in.pending.begin(), plan.in.pending.end(),
                                     [&](const PendingJob& j) { return j.id == b.job; });
               p != plan.in.pending.end()) {
      held.queue = p->queue;
    }
    held.revision = 0;
  }
  memory_.held = std::move(plan.held);
  memory_.base = std::move(plan.base);
  memory_.cluster = std::move(plan.cluster);
  memory_.reservation_moved = plan.incremental && d.reserved_job != memory_.reserved_job;
  memory_.reserved_job = d.reserved_job;
  std::unordered_map<int64_t, const PendingJob*> pending;
  for (const PendingJob& p : plan.in.pending) pending[p.id] = &p;
  for (const WaitExplanation& w : d.waits) {
    if (w.job < 0) continue;
    if (w.settled && Unchanged(plan, w.job)) {  // with its explanation recorded, if new
      // d.waits were moved into the table just published.
      const Waiting* why = waits_->Find(w.job);
      auto gated = [&](std::initializer_list<Gate> gates) {
        return why != nullptr &&
               std::any_of(why->wait.gates.begin(), why->wait.gates.end(), [&](const auto& g) {
                 return std::find(gates.begin(), gates.end(), g.gate) != gates.end();
               });
      };
      memory_.Park(*pending.at(w.job), jobs_.Revision(w.job), gated({Gate::kQuota}),
                   gated({Gate::kPlacement, Gate::kGang}));
    } else {
      memory_.parked.erase(w.job);
    }
  }
}

CycleStats ControlPlane::LastCycle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_cycle_;
}

bool ControlPlane::Unchanged(const CyclePlan& plan, int64_t job) const {
  auto planned = std::lower_bound(plan.revisions.begin(), plan.revisions.end(),
                                  std::pair<int64_t, uint64_t>{job, 0});
  uint64_t now = jobs_.Revision(job);
  if (planned == plan.revisions.end() || planned->first != job || now == 0) return false;
  // A revision the application itself made came after the job was found unchanged.
  return planned->second == now ||
         std::any_of(plan.own.begin(), plan.own.end(),
                     [&](const auto& range) { return now > range.first && now <= range.second; });
}

bool ControlPlane::NodesUnchanged(const CyclePlan& plan, const std::vector<ReplicaPlacement>& where,
                                  const ReservationView& reservations) const {
  const std::vector<PoolSelector> pools = config_.Pools();
  for (const ReplicaPlacement& p : where) {
    const Node& planned = plan.base.node(p.node);
    auto rec = nodes_.find(planned.name);
    if (rec == nodes_.end()) return false;
    if (!(BaseNode(*catalog_, planned.name, rec->second, pools, reservations) == planned)) {
      return false;
    }
  }
  return true;
}

}  // namespace carve
