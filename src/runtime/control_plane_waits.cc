// Why jobs wait (control_plane_queues.cc runs the cycle): the core's explanations made into a
// table without the lock, those that changed recorded in each job's record and a job.waiting
// event, a queue's quota crossing recorded once for the queue, and `carve explain`.
#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/sched/queueing/cycle.h"
#include "core/sched/queueing/resources.h"
#include "runtime/control_plane.h"
#include "runtime/cycle_plan.h"
#include "runtime/explain_json.h"
#include "runtime/reservations.h"

namespace carve {

using json = nlohmann::json;

namespace {

// "job 12" -> `instead` in `text`, wherever "job 12" is not followed by another digit.
void ReplaceJob(std::string& text, int64_t job, absl::string_view instead) {
  const std::string name = absl::StrCat("job ", job);
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at)) {
    size_t end = at + name.size();
    if (end < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[end]))) {
      at = end;
      continue;
    }
    text.replace(at, name.size(), instead.data(), instead.size());
    at += instead.size();
  }
}

}  // namespace

void HideOtherTenants(WaitExplanation& w, int64_t job,
                      const std::map<int64_t, std::string>& tenants) {
  auto tenant = tenants.find(job);
  // Another job's tenant, or none known: not this job's tenant.
  auto other = [&](int64_t id) {
    auto t = tenants.find(id);
    return tenant == tenants.end() || t == tenants.end() || t->second != tenant->second;
  };
  constexpr absl::string_view kOther = "a job of another tenant";
  for (GateFacts& g : w.gates) {
    if (g.reserved_job == 0 || !other(g.reserved_job)) continue;
    ReplaceJob(g.summary, g.reserved_job, kOther);
    ReplaceJob(w.fix, g.reserved_job, kOther);
    g.reserved_job = 0;
  }
  for (AheadOf& a : w.ahead) {
    if (a.job != 0 && other(a.job)) a.job = 0;  // "job": 0, with why it goes first
  }
}

namespace {

// A placement that reservations' taints kept off nodes names them ("reservation launch (2
// nodes)"), so a job's explanation says which reservation holds it back.
// Another tenant's reservation is counted, not named: its name and holder are that tenant's.
void NameReservations(const CyclePlan& plan, const std::vector<ReservationConfig>& reservations,
                      Decisions& d) {
  const ReservationTaintCounts counts = CountReservationTaints(plan.base);
  if (counts.empty()) return;
  std::map<int64_t, const PendingJob*> pending;
  for (const PendingJob& p : plan.in.pending) pending[p.id] = &p;
  static const std::string kNoTenant;  // a job whose tenant is not known sees no name
  std::map<std::string, std::set<std::string>> unnamed;  // tenant -> others' reservations
  for (WaitExplanation& w : d.waits) {
    auto p = pending.find(w.job);
    if (p == pending.end()) continue;
    auto tenant = plan.tenants.find(w.job);
    const std::string& of = tenant == plan.tenants.end() ? kNoTenant : tenant->second;
    auto [hidden, fresh] = unnamed.try_emplace(of);  // once per tenant, not per waiting job
    if (fresh) {
      for (const ReservationConfig& r : reservations) {
        if (of == kNoTenant || r.tenant != of) hidden->second.insert(r.name);
      }
    }
    for (GateFacts& g : w.gates) {
      if (g.gate != Gate::kPlacement || !g.reasons.count("taint")) continue;
      const std::string held =
          ReservationsHoldingBack(counts, hidden->second, p->second->request.replica);
      if (!held.empty()) absl::StrAppend(&g.summary, " (held: ", held, ")");
    }
  }
}

}  // namespace

void ControlPlane::TableWaits(CyclePlan& plan, Decisions& d) const {
  plan.waits = std::make_shared<WaitMap>();
  plan.waits->reserve(d.waits.size());
  const size_t planned = plan.in.pending.size();
  NameReservations(plan, config_.Reservations(), d);
  for (size_t i = 0; i < d.waits.size(); ++i) {
    WaitExplanation& w = d.waits[i];
    HideOtherTenants(w, w.job < 0 ? plan.work[-w.job - 1].job : w.job, plan.tenants);
    for (const GateFacts& g : w.gates) {
      if (g.gate != Gate::kQuota) continue;
      CyclePlan::QuotaHold& hold = plan.quota_holds[{g.queue, g.quota.resource}];
      if (hold.jobs++ == 0) hold.verdict = g.quota;
    }
    if (w.job < 0) {  // a service's replica: its record's wording needs the replica (rare)
      plan.explain.push_back(i);
      continue;
    }
    // Recorded (the job's record, a job.waiting event) when the reason changes, not its counts:
    // a bind elsewhere changes how many nodes are full for every waiting job.
    const int64_t id = w.job;
    std::string summary = w.OwnSummary(), signature = w.OwnSignature();
    const Waiting* last = last_waits_->Find(id);
    if (last == nullptr || last->signature != signature) plan.explain.push_back(i);
    plan.waits->insert_or_assign(id, Waiting{std::move(w), std::move(summary), std::move(signature),
                                             json::object(), plan.now, !plan.incremental, planned});
  }
}

// A full cycle's table replaces the last; an incremental one's goes on top of it (its parked jobs
// keep their explanations).
std::shared_ptr<const WaitTable> ControlPlane::Publish(CyclePlan& plan) const {
  auto table = std::make_shared<WaitTable>();
  // An incremental cycle that left nothing parked judged every waiting job, as a full one does.
  if (!plan.incremental || plan.parked == 0) {
    table->base = std::move(plan.waits);
    return table;
  }
  table->base = waits_->base;
  table->layers = waits_->layers;
  for (int64_t id : plan.dropped) (*plan.waits)[id].gone = true;
  table->Stack(std::move(plan.waits));
  return table;
}

void WaitTable::Stack(std::shared_ptr<const WaitMap> layer) {
  layers.push_back(std::move(layer));
  while (layers.size() >= 2 && 2 * layers.back()->size() >= layers[layers.size() - 2]->size()) {
    auto merged = std::make_shared<WaitMap>(*layers[layers.size() - 2]);
    for (const auto& [id, w] : *layers.back()) (*merged)[id] = w;
    layers.pop_back();
    layers.back() = std::move(merged);
  }
}

absl::Status ControlPlane::RecordWaits(std::unique_lock<std::mutex>& lock, CyclePlan& plan,
                                       const Decisions& d, StoreBatch& batch) {
  if (plan.void_) return absl::OkStatus();
  // In slices, each committed on its own: a cycle that explains thousands of jobs (a burst of
  // submissions) lets calls in between instead of holding the lock for all of them.
  const size_t slice = std::max<size_t>(options_.explain_slice, 1);
  for (size_t from = 0;; from += slice) {
    size_t to = std::min(from + slice, plan.explain.size());
    for (size_t k = from; k < to; ++k) RecordWait(plan, d.waits[plan.explain[k]], batch);
    if (to == plan.explain.size()) break;
    plan.own.back().second = jobs_.last_revision();
    if (absl::Status s = Breathe(lock, batch, "explain"); !s.ok()) return s;
    plan.own.emplace_back(jobs_.last_revision(), std::numeric_limits<uint64_t>::max());
  }
  RecordQuotaHolds(plan, batch);
  plan.replaced = std::exchange(waits_, Publish(plan));  // freed after the lock
  last_waits_ = waits_;
  Remember(plan, d);
  return absl::OkStatus();
}

void ControlPlane::RecordWait(CyclePlan& plan, const WaitExplanation& core, StoreBatch& batch) {
  int64_t id = core.job < 0 ? plan.work[-core.job - 1].job : core.job;
  if (!Unchanged(plan, id)) {  // not recorded: the next cycle compares it again
    if (core.job >= 0) {
      plan.waits->erase(id);
      plan.dropped.push_back(id);
    }
    return;
  }
  if (core.job >= 0) {
    Waits(jobs_.At(id), plan.waits->at(id), batch);
  } else if (plan.explained_work.insert(id).second) {
    Waiting& w = (*plan.waits)[id];
    w.wait = core;
    w.at_us = plan.now;
    w.full = !plan.incremental;
    w.planned = plan.in.pending.size();
    ReplicaWaits(jobs_.At(id), plan.work[-core.job - 1].replica, w, batch);
  }
}

void ControlPlane::RecordQuotaHolds(const CyclePlan& plan, StoreBatch& batch) {
  for (const auto& [key, hold] : plan.quota_holds) {
    if (!quota_held_.insert(key).second) continue;
    // (Named, not bound: clang 14, which builds scripts/fuzz, cannot capture a binding.)
    const std::string& queue = key.first;
    const std::string& resource = key.second;
    const QuotaVerdict& q = hold.verdict;
    auto amount = [&](int64_t v) { return FormatResourceAmount(resource, v); };
    Event(batch, "scheduler", "queue.quota-holds", "queue/" + queue,
          absl::StrCat("queue ", queue, "'s ", resource, " quota holds ", hold.jobs,
                       " waiting job(s): ", amount(q.used), "/", amount(q.nominal), " used, ",
                       amount(q.borrowable), " borrowable"),
          {{"queue", queue},
           {"resource", resource},
           {"jobs", hold.jobs},
           {"used", amount(q.used)},
           {"nominal", amount(q.nominal)},
           {"borrowable", amount(q.borrowable)}});
  }
  // That a queue's quota holds no job is known only from a cycle that ordered every waiting job.
  if (plan.incremental && plan.parked > 0) return;
  for (auto it = quota_held_.begin(); it != quota_held_.end();) {
    if (plan.quota_holds.count(*it)) {
      ++it;
      continue;
    }
    const auto& [queue, resource] = *it;
    Event(batch, "scheduler", "queue.quota-frees", "queue/" + queue,
          absl::StrCat("queue ", queue, "'s ", resource, " quota holds no waiting job"),
          {{"queue", queue}, {"resource", resource}});
    it = quota_held_.erase(it);
  }
}

void ControlPlane::Waits(JobRecord& job, const Waiting& w, StoreBatch& batch) {
  if (w.summary == job.explanation) return;  // as recorded (a restart, a skipped cycle)
  json explained = WaitToJson(w.wait);
  job.explanation = w.summary;
  job.explanation_reasons = explained["reasons"].get<std::map<std::string, int>>();
  job.reason = "waiting: " + w.summary;
  Event(batch, "scheduler", "job.waiting", absl::StrCat("job/", job.id), w.summary,
        {{"gates", explained["gates"]}, {"fix", w.wait.fix}, {"policy", options_.policy}});
  Touch(job, batch);
}

json ControlPlane::ExplainScheduling(const JobRecord& job) const {
  json out = {{"queue", job.spec.queue},
              {"priority_class", job.spec.priority_class},
              {"priority", job.spec.priority},
              {"preemptible", job.spec.preemptible.value_or(true)}};
  if (job.preempted_by != 0) {
    out["preempted_by"] = job.preempted_by;
    out["preemption"] = job.preemption;
    if (job.preempted_by_other_tenant) out["preempted_by_other_tenant"] = true;
  }
  if (!job.victims.empty()) out["victims"] = job.victims;
  const Waiting* wait = waits_->Find(job.id);
  // The table is the last cycle's: a job bound, cancelled or held since is not waiting.
  bool waiting = job.state == JobState::kQueued ||
                 (job.state == JobState::kRunning && !job.explanation.empty());
  if (waiting && wait != nullptr) {
    out.update(WaitToJson(wait->wait));
    out.update(wait->extra);
    out["judged"] = {{"at_us", wait->at_us},
                     {"cycle", wait->full ? "full" : "incremental"},
                     {"jobs_planned", wait->planned}};
  } else if (job.state == JobState::kQueued) {  // no cycle of this server has explained it yet
    out.update({{"gate", ""},
                {"gates", json::array()},
                {"explanation", job.explanation},
                {"reasons", job.explanation_reasons}});
  }
  return out;
}

}  // namespace carve
