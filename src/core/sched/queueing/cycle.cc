#include "core/sched/queueing/cycle.h"

#include <algorithm>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/sched/queueing/backfill.h"
#include "core/sched/queueing/preemption.h"

namespace carve {
namespace {

// A failed placement depends only on the request; within a cycle the cluster only fills (until
// something is released), so one failure per request shape answers for every equal request.
using Shape = std::pair<std::pair<int, int>, ReplicaRequest>;

// Why `victim` stops for `preemptor`, by the kind FindVictims chose.
std::string PreemptionReason(const std::string& kind, const PendingJob& preemptor,
                             const RunningJob& victim) {
  if (kind == "reclaim") {
    return absl::StrCat("preempted by job ", JobOf(preemptor), " for queue ", preemptor.queue,
                        "'s guarantee: queue ", victim.queue, " runs on borrowed capacity");
  }
  if (kind == "reservation") {
    return absl::StrCat("preempted by job ", JobOf(preemptor), ", which holds reservation ",
                        victim.borrows, ": this job borrowed its nodes");
  }
  return absl::StrCat("preempted by job ", JobOf(preemptor), " of higher priority (",
                      preemptor.priority, " > ", victim.priority, ") in queue ", preemptor.queue);
}

class Cycle {
 public:
  explicit Cycle(CycleInput& in)
      : in_(in),
        cluster_(*in.cluster),
        placer_(&cluster_, in.policy, in.seed),
        ledger_(in.queues),
        capacity_(ClusterCapacity(cluster_)) {
    for (const RunningJob& r : in_.running) {
      VictimCandidate c{&r, PlacementCharge(cluster_, r.request, r.replicas), r.stopping,
                        r.stopping ? r.preempted_by : 0};
      ledger_.Charge(r.queue, c.charge);
      candidates_.push_back(std::move(c));
      if (r.preempted_by != 0) preempted_for_[r.id] = r.preempted_by;
    }
  }

  Decisions Run();

 private:
  struct Head {
    OrderKey key;
    std::string queue;
    size_t pos = 0;
  };
  struct HeadAfter {
    bool operator()(const Head& a, const Head& b) const { return Before(b.key, a.key); }
  };

  OrderKey KeyOf(const PendingJob& job, const std::string& queue) const {
    return {job.nominated_us,
            EffectivePriority(job.priority, job.submitted_us, in_.now_us, in_.options.aging),
            ledger_.DominantShare(queue, capacity_), job.submitted_us, job.id};
  }
  void Process(const PendingJob& job, const OrderKey& key);
  PlaceResult Place(const PendingJob& job, const Shape& shape);
  // What the job charges its queue's quota (nothing when it holds its quota already), and
  // whether that fits. With share_quota_verdicts, equal requests of one queue share both: the
  // verdict is taken again only once a charge has moved the ledger.
  const ResourceList& Demand(const PendingJob& job, const Shape& shape);
  QuotaVerdict CheckQuota(const PendingJob& job, const Shape& shape, const ResourceList& demand);
  // NearestFit, once per replica shape and cycle (a scan of every node): later jobs of the same
  // shape read the answer as it was for the first.
  const std::string& Nearest(const ReplicaRequest& replica) {
    auto it = nearest_.find(replica);
    if (it == nearest_.end()) it = nearest_.emplace(replica, NearestFit(cluster_, replica)).first;
    return it->second;
  }
  // The reservation that starting `replicas` until `end` would break, or null.
  const Reservation* Blocker(const std::vector<ReplicaPlacement>& replicas, int64_t end) {
    if (reservation_ && !reservation_->Allows(replicas, end)) return reservation_.get();
    return nullptr;
  }
  // kNone: no victims make it fit (searched now or for an equal request); kSkipped: this cycle
  // ran out of searches before it.
  enum class PreemptOutcome { kPreempted, kNone, kSkipped };
  PreemptOutcome TryPreempt(const PendingJob& job, const ResourceList& demand,
                            WaitExplanation& wait);
  void Reserve(const PendingJob& job, WaitExplanation& wait);
  std::string QuotaFix(const std::string& queue, const QuotaVerdict& v) const;

  CycleInput& in_;
  Cluster& cluster_;
  Placer placer_;
  QuotaLedger ledger_;
  ResourceList capacity_;
  std::vector<VictimCandidate> candidates_;
  absl::flat_hash_map<Shape, FitReport> failed_;
  struct SharedVerdict {
    uint64_t revision = 0;
    QuotaVerdict verdict;
  };
  absl::node_hash_map<Shape, ResourceList> charges_;  // stable references: Demand returns one
  absl::flat_hash_map<std::string_view, absl::flat_hash_map<Shape, SharedVerdict>> verdicts_;
  ResourceList no_demand_;
  ResourceList own_demand_;  // Demand's answer when nothing is shared
  absl::flat_hash_map<ReplicaRequest, std::string> nearest_;
  std::unique_ptr<Reservation> reservation_;
  // Preemptors' claims for the rest of the cycle: each one's placement once what stops for it is
  // gone, held in the cluster next to those jobs (their devices count twice until the cycle
  // ends), so no later job, preemptor or not, takes what it counted on.
  struct Claim {
    std::vector<ReplicaPlacement> placement;
    std::vector<const std::vector<ReplicaPlacement>*> released;
  };
  std::vector<Claim> claims_;
  void Unclaim();
  // Jobs that could not fit even an emptied cluster pass the reservation on to the next blocked
  // job, up to this many tries per cycle (each costs a search over the running jobs' ends).
  int reservation_tries_left_ = 8;
  std::vector<std::pair<int64_t, OrderKey>> waiting_;
  std::vector<int64_t> bound_ends_;           // per bind: its declared end, or kNoEnd
  std::map<int64_t, int64_t> preempted_for_;  // victim -> preemptor
  absl::flat_hash_set<std::pair<std::string, std::pair<int64_t, Shape>>> no_victims_;
  int preemption_searches_ = 0;
  Decisions out_;
};

Decisions Cycle::Run() {
  std::map<std::string, std::vector<const PendingJob*>> by_queue;
  for (const PendingJob& job : in_.pending) by_queue[job.queue].push_back(&job);
  std::priority_queue<Head, std::vector<Head>, HeadAfter> heads;
  for (auto& [queue, jobs] : by_queue) {
    // Inside one queue the share is common: nomination, priority, age and id decide.
    std::vector<std::pair<OrderKey, const PendingJob*>> keyed;
    keyed.reserve(jobs.size());
    for (const PendingJob* j : jobs) keyed.push_back({KeyOf(*j, queue), j});
    std::sort(keyed.begin(), keyed.end(),
              [](const auto& a, const auto& b) { return Before(a.first, b.first); });
    for (size_t i = 0; i < keyed.size(); ++i) jobs[i] = keyed[i].second;
    heads.push({KeyOf(*jobs[0], queue), queue, 0});
  }
  while (!heads.empty()) {
    Head head = heads.top();
    heads.pop();
    const std::vector<const PendingJob*>& jobs = by_queue[head.queue];
    Process(*jobs[head.pos], head.key);
    // The queue's share may have grown: its next job competes with the share as it is now.
    if (head.pos + 1 < jobs.size()) {
      heads.push({KeyOf(*jobs[head.pos + 1], head.queue), head.queue, head.pos + 1});
    }
  }
  Unclaim();
  if (reservation_) {
    out_.reserved_job = reservation_->job();
    out_.reserved_start_us = reservation_->start_us();
  }
  return std::move(out_);
}

// Gives the claims back, leaving the cluster with the running jobs and the binds only.
void Cycle::Unclaim() {
  for (auto it = claims_.rbegin(); it != claims_.rend(); ++it) {
    for (const auto* r : it->released) placer_.Release(*r);
    placer_.Release(it->placement);
    for (const auto* r : it->released) {
      for (const ReplicaPlacement& p : *r) placer_.Apply(p);
    }
  }
  claims_.clear();
}

const ResourceList& Cycle::Demand(const PendingJob& job, const Shape& shape) {
  if (job.quota_held) return no_demand_;
  if (!in_.options.share_quota_verdicts) {
    own_demand_ = RequestCharge(job.request, cluster_.catalog());
    return own_demand_;
  }
  auto it = charges_.find(shape);
  if (it == charges_.end()) {
    it = charges_.emplace(shape, RequestCharge(job.request, cluster_.catalog())).first;
  }
  return it->second;
}

QuotaVerdict Cycle::CheckQuota(const PendingJob& job, const Shape& shape,
                               const ResourceList& demand) {
  if (job.quota_held || !in_.options.share_quota_verdicts) return ledger_.Check(job.queue, demand);
  auto& of_queue = verdicts_[job.queue];  // the key views the job's queue: it outlives the cycle
  auto it = of_queue.find(shape);
  // Stored one past the revision, so that an entry never taken matches no revision.
  uint64_t now = ledger_.revision() + 1;
  if (it == of_queue.end()) it = of_queue.emplace(shape, SharedVerdict{}).first;
  if (it->second.revision != now) it->second = {now, ledger_.Check(job.queue, demand)};
  return it->second.verdict;
}

PlaceResult Cycle::Place(const PendingJob& job, const Shape& shape) {
  auto failed = failed_.find(shape);
  if (failed != failed_.end()) {
    PlaceResult r;
    r.report = failed->second;
    return r;
  }
  PlaceResult r = PlaceWithTopology(placer_, cluster_, job.request, job.topology);
  if (!r.placed) failed_[shape] = r.report;
  return r;
}

void Cycle::Process(const PendingJob& job, const OrderKey& key) {
  WaitExplanation wait;
  wait.job = job.id;
  wait.position = static_cast<int>(out_.binds.size() + out_.waits.size());
  const Shape shape{{job.request.replicas, static_cast<int>(job.topology)}, job.request.replica};
  const ResourceList& demand = Demand(job, shape);
  QuotaVerdict quota = CheckQuota(job, shape, demand);
  PlaceResult placed = Place(job, shape);
  bool ordered_out = false;
  const Reservation* blocker = nullptr;
  if (placed.placed) {
    ResourceList charge = PlacementCharge(cluster_, job.request, placed.replicas);
    if (quota.fits && !job.quota_held) quota = ledger_.Check(job.queue, charge);  // models now
    int64_t end = job.max_runtime_us > 0 ? in_.now_us + job.max_runtime_us : kNoEnd;
    if (quota.fits) blocker = Blocker(placed.replicas, end);
    ordered_out = blocker != nullptr;
    if (quota.fits && !ordered_out) {
      if (reservation_) reservation_->Record(placed.replicas, end);
      ledger_.Charge(job.queue, charge);
      out_.binds.push_back(
          {job.id, std::move(placed.replicas), std::move(charge), reservation_ != nullptr});
      bound_ends_.push_back(end);
      return;
    }
    placer_.Release(placed.replicas);
  }
  if (!quota.fits) {
    wait.gates.push_back(QuotaGate(job.queue, quota));
    wait.fix = QuotaFix(job.queue, quota);
  }
  if (!placed.placed) {
    int placeable = std::max(placed.report.replica, 0);
    if (placeable > 0) {
      GateFacts gang;
      gang.gate = Gate::kGang;
      gang.needed = job.request.replicas;
      gang.placeable = placeable;
      gang.summary = absl::StrCat(placeable, " of ", job.request.replicas,
                                  " replicas fit now; a gang starts whole or not at all");
      wait.gates.push_back(std::move(gang));
    }
    wait.gates.push_back(PlacementGate(cluster_, placed.report));
    if (wait.fix.empty()) {
      wait.fix = placeable > 0
                     ? absl::StrCat("needs room for ", job.request.replicas - placeable,
                                    " more replica(s) next to the ", placeable, " that fit now")
                     : Nearest(job.request.replica);
    }
  }
  if (ordered_out) {
    GateFacts order;
    order.gate = Gate::kOrder;
    order.reserved_job = blocker->job();
    order.reserved_start_us = blocker->start_us();
    if (blocker != reservation_.get()) {
      order.summary =
          absl::StrCat("starting now would take what job ", blocker->job(), " preempted jobs for");
      wait.fix = absl::StrCat("starts after job ", blocker->job());
    } else {
      order.summary = absl::StrCat(
          "starting now would delay job ", blocker->job(), ", which holds the reservation",
          blocker->start_us() >= 0 ? absl::StrCat(" from ", blocker->start_us()) : std::string());
      wait.fix = absl::StrCat("starts after job ", blocker->job(),
                              ", or now with a max runtime that ends before its reserved start");
    }
    wait.gates.push_back(std::move(order));
  }
  PreemptOutcome preempt = PreemptOutcome::kNone;
  if (!ordered_out && in_.options.preemption) preempt = TryPreempt(job, demand, wait);
  if (preempt == PreemptOutcome::kPreempted) {
    // Waiting for its victims to stop.
  } else if (!ordered_out && quota.fits && !placed.placed && in_.options.backfill) {
    Reserve(job, wait);
  }
  // A job this cycle's searches did not reach is settled too: a full cycle would not reach it
  // either while the jobs ahead of it are still waiting.
  wait.settled = !ordered_out && preempt != PreemptOutcome::kPreempted && !wait.reserved;
  int listed = 0;
  for (auto it = waiting_.rbegin();
       it != waiting_.rend() && listed < in_.options.waiting_ahead_listed; ++it, ++listed) {
    wait.ahead.push_back({it->first, WhyBefore(it->second, key)});
  }
  waiting_.push_back({JobOf(job), key});
  out_.waits.push_back(std::move(wait));
}

Cycle::PreemptOutcome Cycle::TryPreempt(const PendingJob& job, const ResourceList& demand,
                                        WaitExplanation& wait) {
  // Equal requests of one queue and priority find the same victims, or none.
  auto key = std::make_pair(
      absl::StrCat(job.queue, "|", absl::StrJoin(job.holds, ",")),
      std::make_pair(job.priority, Shape{{job.request.replicas, 0}, job.request.replica}));
  if (no_victims_.count(key)) return PreemptOutcome::kNone;
  if (preemption_searches_ >= in_.options.max_preemption_searches) return PreemptOutcome::kSkipped;
  ++preemption_searches_;
  Preemptor p{&job, demand};
  VictimSet set = FindVictims(placer_, ledger_, p, candidates_, in_.options.max_victim_candidates);
  if (!set.fits) {
    no_victims_.insert(key);
    return PreemptOutcome::kNone;
  }
  GateFacts g;
  g.gate = Gate::kPreemption;
  for (size_t k = 0; k < set.victims.size(); ++k) {
    candidates_[set.victims[k]].stopping = true;
    candidates_[set.victims[k]].claimed_by = job.id;
    const RunningJob& v = *candidates_[set.victims[k]].job;
    preempted_for_[v.id] = job.id;
    std::string reason = PreemptionReason(set.kinds[k], job, v);
    out_.preemptions.push_back({v.id, JobOf(job), v.queue, set.kinds[k], reason});
  }
  for (const VictimCandidate& c : candidates_) {
    auto it = preempted_for_.find(c.job->id);
    if (c.stopping && it != preempted_for_.end() && it->second == job.id) {
      g.victims.push_back(c.job->id);
    }
  }
  g.summary = g.victims.empty()
                  ? "waiting for stopping jobs to release their resources"
                  : absl::StrCat("waiting for ", g.victims.size(), " preempted job(s) to stop");
  // The preemptor's claim for the rest of the cycle: its quota, and room in the cluster once
  // what stops for it is gone (later jobs may not take either).
  // The quota of what stops for it passes to it now; the devices stay held until they stop.
  std::vector<const std::vector<ReplicaPlacement>*> released;
  for (VictimCandidate& c : candidates_) {
    if (!c.stopping || (c.claimed_by != job.id && c.claimed_by != 0) || c.uncharged) continue;
    released.push_back(&c.job->replicas);
    c.claimed_by = job.id;
    c.uncharged = true;
    ledger_.Charge(c.job->queue, c.charge, -1);
  }
  ledger_.Charge(job.queue, demand);
  for (const auto* r : released) placer_.Release(*r);
  for (const ReplicaPlacement& p : set.placement) placer_.Apply(p);
  for (const auto* r : released) {
    for (const ReplicaPlacement& p : *r) placer_.Apply(p);
  }
  claims_.push_back({set.placement, std::move(released)});
  // Preemption supersedes the gates above: they lift once the victims have stopped.
  wait.fix = "starts once its victims have stopped and their devices are reclaimed";
  wait.gates.push_back(std::move(g));
  return PreemptOutcome::kPreempted;
}

void Cycle::Reserve(const PendingJob& job, WaitExplanation& wait) {
  if (reservation_ || reservation_tries_left_ <= 0) return;
  --reservation_tries_left_;
  std::vector<Holding> holdings;
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& r = in_.running[i];
    int64_t end = candidates_[i].stopping ? in_.now_us
                  : r.max_runtime_us > 0  ? std::max(in_.now_us, r.started_us + r.max_runtime_us)
                                          : kNoEnd;
    holdings.push_back({&r.replicas, end});
  }
  for (size_t i = 0; i < out_.binds.size(); ++i) {
    holdings.push_back({&out_.binds[i].replicas, bound_ends_[i]});
  }
  reservation_ = Reservation::Make(cluster_, in_.policy, JobOf(job), job.request, holdings);
  if (!reservation_) {
    // Nodes a taint keeps it off (a reservation's, a dedicated pool's) may free up, or be the
    // only ones it would fit: "this cluster" would overstate it.
    const bool tainted =
        std::any_of(cluster_.nodes().begin(), cluster_.nodes().end(), [&](const Node& node) {
          return CheckNode(cluster_, node, job.request.replica) == FitReason::kTaint;
        });
    wait.fix = absl::StrCat(
        tainted ? "cannot fit the nodes its tolerations allow" : "cannot fit this cluster",
        " even when every running job has ended: ", wait.fix);
    return;
  }
  wait.reserved = true;
  wait.reserved_start_us = reservation_->start_us();
}

std::string Cycle::QuotaFix(const std::string& queue, const QuotaVerdict& v) const {
  std::string more = FormatResourceAmount(v.resource, v.requested - v.available);
  if (v.reclaimable) {
    return absl::StrCat("queue ", queue, " lent its quota; reclaiming ", more, " ", v.resource,
                        " from borrowing queues");
  }
  return absl::StrCat("needs ", more, " more ", v.resource, " in queue ", queue,
                      ": wait for its jobs to end, or raise its nominal quota or borrowing limit");
}

}  // namespace

Decisions Schedule(CycleInput& input) {
  bool compact = std::any_of(input.pending.begin(), input.pending.end(),
                             [](const PendingJob& j) { return j.topology == Topology::kCompact; });
  if (compact) LabelNodeNames(*input.cluster);
  Cycle cycle(input);
  return cycle.Run();
}

}  // namespace carve
