// Queues in the control plane: submission checks, the core's queueing cycle over the live state
// (binds, preemptions, explanations) and the queue report.
#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/sched/queueing/cycle.h"
#include "core/sched/queueing/order.h"
#include "runtime/control_plane.h"
#include "runtime/cycle_plan.h"
#include "runtime/explain_json.h"
#include "runtime/reservations.h"
#include "runtime/scheduling_grants.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr absl::string_view kPreemptedBy = "preempted by ";

int64_t MaxRuntimeUs(const JobSpec& spec) {
  return spec.max_runtime.empty() ? 0 : ParseDurationUs(spec.max_runtime).value_or(0);
}

// Told to stop (cancelled, drained, preempted) or releasing its devices: not a victim again.
bool Stopping(const JobRecord& job) {
  return job.cancel_requested || !job.displaced.empty() || job.state == JobState::kReclaiming;
}

// A service's replicas without a node enter the cycle as pending work, one entry each (entry
// ids are negative, unique in the cycle), with the job's queue, pool, priority and age.
void AddReplicaWork(const JobRecord& job, const JobRequest& request, int64_t nominated,
                    CycleInput& in, std::vector<ReplicaWork>& work) {
  if (job.state != JobState::kRunning || job.cancel_requested) return;
  for (size_t i = 0; i < job.replicas.size(); ++i) {
    const ReplicaRecord& rep = job.replicas[i];
    if (!rep.node.empty() || rep.state != ReplicaState::kPending) continue;
    work.push_back({job.id, i});
    PendingJob p{-static_cast<int64_t>(work.size()),
                 job.spec.queue,
                 job.spec.priority,
                 job.spec.preemptible.value_or(true),
                 job.created_us,
                 0,
                 request,
                 Topology::kAny,
                 nominated};
    p.request.replicas = 1;
    p.job = job.id;
    p.quota_held = rep.replacement;
    in.pending.push_back(std::move(p));
  }
}

// What the reservations let each planned job do (reservations.h): tolerate their taints, take
// their room back from borrowers, or be such a borrower.
void ApplyReservations(const ReservationView& view, const JobTable& jobs, CyclePlan& plan) {
  if (view.empty()) return;
  auto tenant_of = [&](int64_t id) {
    const JobRecord* job = jobs.Find(id);
    return job == nullptr ? std::string() : job->spec.tenant;
  };
  for (PendingJob& p : plan.in.pending) {
    const std::string tenant = tenant_of(JobOf(p));
    view.Tolerate(p.request.replica, tenant, p.queue, p.preemptible, p.max_runtime_us);
    p.holds = view.Holds(tenant, p.queue);
  }
  for (RunningJob& r : plan.in.running) {
    std::vector<std::pair<std::string, std::vector<int>>> used;
    for (const ReplicaPlacement& p : r.replicas) {
      std::vector<int> gpus;
      for (const DeviceGrant& g : p.grants) gpus.push_back(g.device);
      used.emplace_back(plan.base.node(p.node).name, std::move(gpus));
    }
    r.borrows = view.Borrows(tenant_of(r.id), r.queue, used);
  }
}

}  // namespace

absl::Status ControlPlane::CheckQueueAccess(const JobSpec& spec, const Principal& who) const {
  bool admin = who.role == Role::kAdmin;
  if (admin ? config_.Exists("queue", spec.queue)
            : QueueUsable(config_, spec.tenant, spec.project, spec.queue)) {
    return absl::OkStatus();
  }
  // One answer for a queue that does not exist and for another tenant's: the caller's own choice.
  std::string hint =
      admin ? "`carve apply -f` one, or leave it out"
            : absl::StrCat("project ", spec.project, " may use: ",
                           absl::StrJoin(UsableQueues(config_, spec.tenant, spec.project), ", "));
  return absl::InvalidArgumentError(absl::StrCat("queue: no queue \"", spec.queue, "\"; ", hint));
}

absl::Status ControlPlane::ResolveScheduling(JobSpec& spec, const json& body,
                                             const Principal& who) const {
  const ProjectConfig* project = config_.Project(spec.project);
  if (project != nullptr && project->queues) {
    const std::vector<std::string>& allowed = *project->queues;
    if (std::find(allowed.begin(), allowed.end(), spec.queue) == allowed.end()) {
      return absl::PermissionDeniedError(
          absl::StrCat("queue: project ", spec.project, " may submit to ",
                       absl::StrJoin(allowed, ", "), "; not to \"", spec.queue, "\""));
    }
  }
  bool capped = who.role != Role::kAdmin;
  std::vector<PriorityClass> classes = config_.Classes();
  std::string name = !spec.priority_class.empty() ? spec.priority_class
                     : capped                     ? DefaultClass(config_, spec.tenant, spec.project)
                                                  : "standard";
  auto c = std::find_if(classes.begin(), classes.end(),
                        [&](const PriorityClass& k) { return k.name == name; });
  if (c == classes.end() && !capped) {
    std::vector<std::string> known;
    for (const PriorityClass& k : classes) known.push_back(k.name);
    return absl::InvalidArgumentError(absl::StrCat("priority_class: no priority class \"", name,
                                                   "\"; known: ", absl::StrJoin(known, ", ")));
  }
  if (c != classes.end()) {
    spec.priority_class = c->name;
    if (!body.contains("priority")) spec.priority = c->priority;
    if (!spec.preemptible.has_value()) spec.preemptible = c->preemptible;
  }
  if (!capped) return absl::OkStatus();
  return CheckSchedulingCaps(config_, spec.tenant, spec.project, name, spec.priority,
                             spec.preemptible.value_or(true));
}

absl::Status ControlPlane::PlanWork(std::unique_lock<std::mutex>& lock, CyclePlan& plan,
                                    const Released& released, StoreBatch& batch) {
  const int64_t now = plan.now;
  CycleInput& in = plan.in;
  in.seed = static_cast<uint64_t>(now);
  in.now_us = now;
  in.queues = config_.QueueSpecs();
  std::map<std::string, std::string> pools;
  for (const QueueSpec& q : in.queues) pools[q.name] = q.pool;
  const std::set<int64_t> windows = ScheduledWindows();
  for (const auto& [id, where] : plan.held) {
    const JobRecord& job = *jobs_.placed().at(id).job;
    if (Stopping(job) && !absl::StartsWith(job.displaced, kPreemptedBy)) plan.stopping.insert(id);
  }
  plan.full_why = memory_.FullCycleReason(now, options_.full_cycle_every_us, config_.revision(),
                                          plan.nodes_changed, plan.stopping);
  const int64_t holder = memory_.reserved_job;
  plan.reopened = memory_.reservation_moved ||
                  (holder > 0 && (!jobs_.Contains(holder) ||
                                  jobs_.At(holder).state != JobState::kQueued));  // it left
  if (plan.full_why.empty() && plan.reopened && !options_.unpark_by_room) {
    plan.full_why = "the reservation passed on";  // the next one in order takes it
  }
  plan.incremental = plan.full_why.empty() && options_.full_cycle_every_us > 0;
  if (plan.incremental) Unpark(plan, released);
  // In slices: a cycle over 100,000 jobs lets calls in between (what a slice reads is checked
  // again when the plan is applied, as is all of it).
  const size_t slice = std::max<size_t>(options_.plan_slice, 1);
  const JobTable::LiveJobs& active = jobs_.active();
  for (auto it = active.begin();;) {
    for (size_t n = 0; it != active.end() && n < slice; ++it, ++n) {
      PlanJob(plan, *it->second.job, it->second.revision, pools, windows, batch);
    }
    if (it == active.end()) {
      ApplyReservations(
          ReservationView(config_.Reservations(), nodes_, config_.Pools(), now, *catalog_), jobs_,
          plan);
      return absl::OkStatus();
    }
    int64_t next = it->first;
    if (absl::Status s = Breathe(lock, batch, "plan"); !s.ok()) return s;
    it = active.lower_bound(next);
  }
}

absl::Status ControlPlane::Breathe(std::unique_lock<std::mutex>& lock, StoreBatch& batch,
                                   const std::string& step) {
  if (batch.empty()) {
    lock.unlock();
  } else if (absl::Status s = Durable(lock, std::exchange(batch, StoreBatch{})); !s.ok()) {
    return s;
  }
  if (options_.between_slices) options_.between_slices(step);
  lock.lock();
  return broken_ ? Broken() : absl::OkStatus();
}

// The queues whose parked jobs a release lets back in: those sharing a cohort with a queue
// that got quota back (their jobs that wait for quota alone). And of the parked jobs that wait
// for room, alone or with quota that came back, the first of each queue, request and max
// runtime in the queue's order: as many as the released nodes take (SchedulerMemory::RoomFor),
// and one more, the first that could hold the backfill reservation (the first job in order
// blocked on room holds it, and queue shares, hence the order across queues, move with every
// bind and release). A job that waits for both, whose quota did not come back, when devices
// its request fits are released, now waits for quota alone.
void ControlPlane::Unpark(CyclePlan& plan, const Released& released) {
  std::set<std::string> cohorts;
  for (const QueueSpec& q : plan.in.queues) {
    if (released.queues.count(q.name) && !q.cohort.empty()) cohorts.insert(q.cohort);
  }
  plan.unparked_queues = released.queues;
  for (const QueueSpec& q : plan.in.queues) {
    if (cohorts.count(q.cohort)) plan.unparked_queues.insert(q.name);
  }
  // Counted up to this many replicas of a request; a request with more room lets back all.
  constexpr int kRoomLimit = 1024;
  std::map<size_t, int> room;
  if (!released.nodes.empty()) room = memory_.RoomFor(plan.cluster, released, kRoomLimit);
  auto room_for = [&](size_t shape) {
    auto fits = room.find(shape);
    return fits == room.end() ? 0 : fits->second;
  };
  // Within one queue the share is common: nomination (none while parked), aged priority,
  // submission and id decide, as in the core.
  absl::flat_hash_map<std::tuple<std::string_view, size_t, int64_t>, std::vector<OrderKey>> lines;
  for (auto& [id, parked] : memory_.parked) {
    if (!parked.room) continue;  // room was not what held it back
    const int fits = room_for(parked.shape);
    if (!options_.unpark_by_room) {
      if (fits > 0) plan.unparked_jobs.insert(id);
      continue;
    }
    if (parked.quota && !plan.unparked_queues.count(parked.queue)) {
      if (fits > 0) parked.room = false;  // its quota still holds it: back when the quota is
      continue;
    }
    if (fits >= kRoomLimit || nominated_.count(id)) {
      plan.unparked_jobs.insert(id);
      continue;
    }
    int64_t priority =
        EffectivePriority(parked.priority, parked.submitted_us, plan.now, plan.in.options.aging);
    lines[{parked.queue, parked.shape, parked.max_runtime_us}].push_back(
        {0, priority, 0, parked.submitted_us, id});
  }
  // In each line, the first `take` jobs still parked as judged (an entry whose job changed or
  // left since is stale: dropped here, and never counted).
  const JobTable::LiveJobs& active = jobs_.active();
  std::vector<int64_t> stale;
  auto before = [](const OrderKey& a, const OrderKey& b) { return Before(a, b); };
  for (auto& [line, keys] : lines) {
    const size_t take = room_for(std::get<1>(line)) + 1;
    size_t sorted = std::min(keys.size(), 2 * take + 8);
    std::partial_sort(keys.begin(), keys.begin() + sorted, keys.end(), before);
    size_t taken = 0;
    for (size_t k = 0; k < keys.size() && taken < take; ++k) {
      if (k == sorted) {  // more stale entries than guessed: order the rest
        std::sort(keys.begin() + k, keys.end(), before);
        sorted = keys.size();
      }
      const int64_t id = keys[k].id;
      auto live = active.find(id);
      if (live == active.end() || live->second.revision != memory_.parked.at(id).revision) {
        stale.push_back(id);
        continue;
      }
      plan.unparked_jobs.insert(id);
      ++taken;
    }
  }
  for (int64_t id : stale) memory_.parked.erase(id);
}

bool ControlPlane::Parked(const CyclePlan& plan, const JobRecord& job, uint64_t revision) const {
  auto it = memory_.parked.find(job.id);
  return it != memory_.parked.end() && it->second.revision == revision &&
         job.id != memory_.reserved_job && !plan.unparked_jobs.count(job.id) &&
         !(!it->second.room && plan.unparked_queues.count(job.spec.queue));
}

void ControlPlane::PlanJob(CyclePlan& plan, JobRecord& job, uint64_t revision,
                           const std::map<std::string, std::string>& pools,
                           const std::set<int64_t>& windows, StoreBatch& batch) {
  const int64_t now = plan.now;
  const int64_t id = job.id;
  CycleInput& in = plan.in;
  if (job.state == JobState::kQueued) {
    if (job.not_before_us > now) return;  // a retry's backoff
    if (plan.incremental && Parked(plan, job, revision)) {
      ++plan.parked;  // judged on what is still there: nothing it could use was released since
      return;
    }
  }
  const JobRequest* cached = jobs_.RequestOf(job);
  if (cached == nullptr) return;  // validated at submission; the catalog cannot shrink
  std::optional<JobRequest> request = *cached;
  auto pool = pools.find(job.spec.queue);
  if (pool != pools.end() && !pool->second.empty()) request->replica.pool = pool->second;
  bool preemptible = job.spec.preemptible.value_or(true);
  size_t before = plan.work.size();
  if (job.state == JobState::kRunning) {
    bool unplaced = std::any_of(job.replicas.begin(), job.replicas.end(), [](const auto& r) {
      return r.node.empty() && r.state == ReplicaState::kPending;
    });
    // A job being stopped (displaced, cancelled) places no new replica: it would hold GPUs it
    // never uses, never a victim while it stops (a stopping borrower starved a reservation's
    // holder).
    if (unplaced && !Stopping(job)) {  // most running jobs have none: no request to copy
      JobRequest replica = *request;
      TolerateWindows(replica, job.spec, now, windows);
      AddReplicaWork(job, replica, nominated_.count(id) ? nominated_.at(id) : 0, in, plan.work);
      plan.tenants[id] = job.spec.tenant;
    }
    if (plan.work.size() == before && !job.explanation.empty()) {  // its replicas all placed
      job.explanation.clear();
      job.explanation_reasons.clear();
      Touch(job, batch);
    }
  }
  // As it is now (clearing its explanation raised it); the active jobs are in id order.
  plan.revisions.emplace_back(id, job.state == JobState::kQueued ? revision : jobs_.Revision(id));
  if (job.state == JobState::kQueued) {
    plan.tenants[id] = job.spec.tenant;
    TolerateWindows(*request, job.spec, now, windows);
    in.pending.push_back({id, job.spec.queue, job.spec.priority, preemptible, job.created_us,
                          MaxRuntimeUs(job.spec), std::move(*request),
                          ParseTopology(job.spec.topology).value_or(Topology::kAny),
                          nominated_.count(id) ? nominated_.at(id) : 0});
    return;
  }
  auto holds = plan.held.find(id);
  if (IsFinal(job.state) || holds == plan.held.end()) return;
  // Charged for what it holds: a service being scaled or replaced holds other than its spec.
  request->replicas = static_cast<int>(holds->second.placements.size());
  bool stopping = Stopping(job);
  int64_t by = stopping && absl::StartsWith(job.displaced, kPreemptedBy) ? job.preempted_by : 0;
  in.running.push_back({id, job.spec.queue, job.spec.priority, preemptible,
                        job.started_us > 0 ? job.started_us : job.scheduled_us,
                        MaxRuntimeUs(job.spec), std::move(*request), holds->second.placements,
                        stopping, by});
}

int ControlPlane::ApplyPlan(CyclePlan& plan, const Decisions& d, StoreBatch& batch) {
  plan.own.emplace_back(jobs_.last_revision(), std::numeric_limits<uint64_t>::max());
  // Nominations only hold while a job is queued (it may have been cancelled) or has replicas
  // waiting.
  std::set<int64_t> working;
  for (const ReplicaWork& w : plan.work) working.insert(w.job);
  std::erase_if(nominated_, [&](const auto& entry) {
    const JobRecord* job = jobs_.Find(entry.first);
    return job == nullptr || (job->state != JobState::kQueued && !working.count(entry.first));
  });
  if (plan.config_revision != config_.revision()) {  // queues changed: plan again
    plan.void_ = true;
    return 0;
  }
  // A job or replica changed since the plan read it (cancelled, drained, bound) waits for the
  // next cycle, as does one whose node changed (cordoned, lost, re-registered, devices fenced).
  const ReservationView reservations(config_.Reservations(), nodes_, config_.Pools(), plan.now,
                                     *catalog_);
  auto holds = [&](int64_t job, const std::vector<ReplicaPlacement>& where) {
    return Unchanged(plan, job) && NodesUnchanged(plan, where, reservations);
  };
  int scheduled = 0;
  for (const Bind& b : d.binds) {
    int64_t id = b.job < 0 ? plan.work[-b.job - 1].job : b.job;
    if (!holds(id, b.replicas)) {
      ++plan.skipped;
      continue;
    }
    ++scheduled;
    nominated_.erase(id);
    if (b.job < 0) {
      PlaceReplica(jobs_.At(id), plan.work[-b.job - 1].replica, b.replicas.at(0), plan.cluster,
                   batch);
      continue;
    }
    BindJob(jobs_.At(b.job), b.replicas, plan.cluster, b.backfilled, plan.now, batch);
    plan.dropped.push_back(b.job);  // an earlier cycle's explanation no longer holds
  }
  for (const Preemption& p : d.preemptions) {
    if (!Unchanged(plan, p.victim) || !Unchanged(plan, p.preemptor)) {
      ++plan.skipped;
      continue;
    }
    Preempt(p, plan.now, batch);
  }
  return scheduled;
}

void ControlPlane::Preempt(const Preemption& p, int64_t now, StoreBatch& batch) {
  JobRecord& victim = jobs_.At(p.victim);
  JobRecord& preemptor = jobs_.At(p.preemptor);
  // A job of another tenant is told neither the preemptor's id nor a reservation's name (its
  // holder's): "preempted by a job of another tenant".
  const bool other = victim.spec.tenant != preemptor.spec.tenant;
  const std::string reason =
      !other ? p.reason
      : p.kind == "reservation"
          ? std::string(kPreemptedBy) +
                "a job of another tenant, which holds the reservation of what this job borrowed"
          : absl::StrCat(kPreemptedBy, "a job of another tenant (", p.kind, ")");
  victim.preempted_by = p.preemptor;
  victim.preempted_by_other_tenant = other;
  victim.preemption = reason;
  json details = {{"kind", p.kind}, {"queue", p.victim_queue}};
  if (!other) details["preemptor"] = p.preemptor;
  Event(batch, "scheduler", "job.preempted", absl::StrCat("job/", p.victim), reason, details);
  Displace(victim, reason, batch);
  json entry = {{"job", p.victim}, {"reason", p.reason}};
  if (other) entry["other_tenant"] = true;
  preemptor.victims.push_back(std::move(entry));
  nominated_.emplace(p.preemptor, now);
  Touch(preemptor, batch);
}

void ControlPlane::BindJob(JobRecord& job, const std::vector<ReplicaPlacement>& replicas,
                           const Cluster& cluster, bool backfilled, int64_t now,
                           StoreBatch& batch) {
  job.state = JobState::kScheduled;
  job.scheduled_us = now;
  if (job.attempt == 0) {
    std::deque<int64_t>& waits = recent_waits_[job.spec.queue];
    waits.push_back(now - job.created_us);
    if (waits.size() > kRecentStarts) waits.pop_front();
  }
  job.waited_for = job.explanation;  // this attempt's; empty: placed in its first cycle
  job.explanation.clear();
  job.explanation_reasons.clear();
  job.replicas.clear();
  json where = json::array();
  std::vector<std::string> nodes_used;
  for (const ReplicaPlacement& p : replicas) {
    ReplicaRecord rep = ToReplicaRecord(cluster, p);
    rep.slot = static_cast<int>(job.replicas.size());
    rep.log_base = LogSize(job, rep.slot);  // a retry's output goes after the earlier attempts'.
    json devices = json::array();
    for (const GrantRecord& g : rep.grants) devices.push_back(g.device);
    where.push_back({{"node", rep.node}, {"devices", devices}});
    nodes_used.push_back(rep.node);
    job.replicas.push_back(std::move(rep));
  }
  job.reason = "placed on " + absl::StrJoin(nodes_used, ", ");
  if (backfilled) job.reason += " (backfilled: ends before the reserved job needs its devices)";
  Event(batch, "scheduler", "job.scheduled", absl::StrCat("job/", job.id), job.reason,
        {{"replicas", where}, {"policy", options_.policy}, {"backfilled", backfilled}});
  Touch(job, batch);
}

bool ControlPlane::QueueVisible(const std::string& queue, const Principal& who) const {
  if (who.role == Role::kAdmin) return true;
  // The queues its project may use (H2's rules, scheduling_grants.h); a tenant-admin's: those of
  // any project of its tenant.
  std::vector<std::string> projects = who.role == Role::kTenantAdmin
                                          ? config_.ProjectsOf(who.tenant)
                                          : std::vector<std::string>{who.project};
  for (const std::string& p : projects) {
    if (carve::QueueUsable(config_, who.tenant, p, queue)) return true;
  }
  return false;
}

namespace {

// {jobs, p50_us, p90_us, p99_us, max_us} of `waits` (nearest rank).
json WaitPercentiles(const std::deque<int64_t>& waits) {
  std::vector<int64_t> sorted(waits.begin(), waits.end());
  std::sort(sorted.begin(), sorted.end());
  auto rank = [&](int p) {
    size_t at = (sorted.size() * static_cast<size_t>(p) + 99) / 100;
    return sorted[std::max<size_t>(at, 1) - 1];
  };
  return {{"jobs", sorted.size()},
          {"p50_us", rank(50)},
          {"p90_us", rank(90)},
          {"p99_us", rank(99)},
          {"max_us", sorted.back()}};
}

}  // namespace

QuotaLedger ControlPlane::ChargedQueues(std::map<std::string, int>* running) const {
  QuotaLedger ledger(config_.QueueSpecs());
  // Queued jobs are counted in the job table's queued totals as they come.
  for (const auto& [id, placed] : jobs_.placed()) {
    const JobRecord& job = *placed.job;
    const JobRequest* cached = jobs_.RequestOf(job);
    if (cached == nullptr || IsFinal(job.state)) continue;
    // What it holds (a service's replicas being placed: not yet).
    std::optional<JobRequest> request = *cached;
    request->replicas = static_cast<int>(
        std::count_if(job.replicas.begin(), job.replicas.end(), [](const ReplicaRecord& r) {
          return !r.node.empty() && r.state != ReplicaState::kRetired;
        }));
    ResourceList charge = RequestCharge(*request, *catalog_);
    if (request->replica.gpu.mode == DeliveryMode::kExclusive &&
        request->replica.allowed_models.size() != 1) {
      for (const ReplicaRecord& r : job.replicas) {
        auto node = nodes_.find(r.node);
        for (const GrantRecord& g : r.grants) {
          if (node == nodes_.end() || g.device >= static_cast<int>(node->second.gpus.size())) {
            continue;
          }
          auto model = catalog_->Find(node->second.gpus[g.device].model);
          if (model.ok()) charge["gpus/" + catalog_->model(*model).name] += kWholeGpu.units();
        }
      }
    }
    if (running != nullptr) ++(*running)[job.spec.queue];
    ledger.Charge(job.spec.queue, charge);
  }
  return ledger;
}

json ControlPlane::QueueStatus(const Principal& who) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int> running;
  QuotaLedger ledger = ChargedQueues(&running);
  const std::vector<QueueSpec>& specs = ledger.queues();
  std::set<std::string> names = {"default"};
  for (const QueueSpec& q : specs) names.insert(q.name);
  for (const auto& [q, total] : jobs_.queued()) names.insert(q);
  for (const auto& [q, n] : running) names.insert(q);
  json out = json::array();
  for (const std::string& name : names) {
    if (!QueueVisible(name, who)) continue;
    const QueueSpec* q = ledger.Find(name);
    auto found = jobs_.queued().find(name);
    const auto* queued = found == jobs_.queued().end() ? nullptr : &*found;
    json resources = json::object();
    for (const auto& [resource, s] : ledger.Status(name)) {
      // (a named copy: clang 14, which builds scripts/fuzz, cannot capture a binding.)
      auto amount = [&, kind = resource](int64_t v) { return FormatResourceAmount(kind, v); };
      json r = {{"used", amount(s.used)}};
      if (s.limited) {
        r.update({{"quota", amount(s.nominal)},
                  {"borrowed", amount(s.borrowed)},
                  {"lent", amount(s.lent)},
                  {"borrowable", amount(s.borrowable)}});
      }
      resources[resource] = r;
    }
    out.push_back(
        {{"name", name},
         {"cohort", q ? q->cohort : ""},
         {"pool", q ? q->pool : ""},
         {"weight", q ? q->weight : 1.0},
         {"pending", queued ? queued->second.jobs : 0},
         {"running", running[name]},
         {"pending_demand", ResourcesToJson(queued ? queued->second.demand : ResourceList{})},
         {"resources", resources}});
    if (auto w = recent_waits_.find(name); w != recent_waits_.end()) {
      out.back()["waits"] = WaitPercentiles(w->second);
    }
  }
  return out;
}

}  // namespace carve
