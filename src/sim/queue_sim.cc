#include "sim/queue_sim.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace carve::sim {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

int64_t RunFor(const QueueSimJob& job) {
  return job.max_runtime_us > 0 ? std::min(job.duration_us, job.max_runtime_us) : job.duration_us;
}

int64_t GpuMilli(const std::vector<ReplicaPlacement>& replicas) {
  int64_t milli = 0;
  for (const ReplicaPlacement& p : replicas) {
    for (const DeviceGrant& g : p.grants) milli += g.compute.units();
  }
  return milli;
}

}  // namespace

QueueSim::QueueSim(Cluster cluster, std::vector<QueueSpec> queues, QueueSimOptions options)
    : cluster_(std::move(cluster)),
      queues_(std::move(queues)),
      options_(std::move(options)),
      policy_(*MakePolicy(options_.policy, options_.policy_options)) {}

void QueueSim::Add(QueueSimJob job) { jobs_.push_back(std::move(job)); }

QueueSimResult QueueSim::Run() {
  std::stable_sort(jobs_.begin(), jobs_.end(), [](const QueueSimJob& a, const QueueSimJob& b) {
    return a.submitted_us < b.submitted_us;
  });
  for (const QueueSimJob& j : jobs_) by_id_[j.id] = &j;
  size_t next = 0;
  int64_t now = jobs_.empty() ? 0 : jobs_[0].submitted_us;
  while (true) {
    Finish(now);
    for (; next < jobs_.size() && jobs_[next].submitted_us <= now; ++next) {
      pending_[jobs_[next].id] = &jobs_[next];
    }
    if (options_.horizon_us > 0 && now > options_.horizon_us) break;
    if (pending_.empty() && active_.empty() && next == jobs_.size()) {
      Sample(now);  // the state at the end: nothing runs, nothing waits
      break;
    }
    const Decisions d = Cycle(now);
    Record(d, now);
    Sample(now);
    // What waits with nothing running and nothing left to arrive can never start (the cluster is
    // as empty as it gets); aging alone would wake a cycle every interval forever.
    if (active_.empty() && next == jobs_.size() && d.binds.empty()) break;
    int64_t event = NextEvent(now, next);
    if (event == kNever) break;
    now = std::max(now + options_.cycle_us, event);
  }
  result_.end_us = now;
  return std::move(result_);
}

// Ends what has run its course, and releases victims whose stop delay has passed.
void QueueSim::Finish(int64_t now) {
  for (auto it = active_.begin(); it != active_.end();) {
    Active& a = it->second;
    bool done = !a.stopping && a.started_us + RunFor(*a.job) <= now;
    bool stopped = a.stopping && a.stop_at_us <= now;
    if (!done && !stopped) {
      ++it;
      continue;
    }
    for (const ReplicaPlacement& p : a.replicas) ReleaseReplica(cluster_, p);
    if (done) {
      result_.jobs[it->first].end_us = a.started_us + RunFor(*a.job);
    } else {
      pending_[it->first] = a.job;  // requeued; its age keeps counting from submission
    }
    it = active_.erase(it);
  }
}

Decisions QueueSim::Cycle(int64_t now) {
  CycleInput in;
  in.cluster = &cluster_;
  in.policy = policy_.get();
  in.seed = static_cast<uint64_t>(result_.cycles);
  in.queues = queues_;
  in.now_us = now;
  in.options = options_.cycle;
  for (const auto& [id, job] : pending_) {
    in.pending.push_back(*job);
    in.pending.back().nominated_us = nominated_.count(id) ? nominated_.at(id) : 0;
  }
  for (const auto& [id, a] : active_) {
    in.running.push_back({id, a.job->queue, a.job->priority, a.job->preemptible, a.started_us,
                          a.job->max_runtime_us, a.job->request, a.replicas, a.stopping,
                          a.preempted_by});
  }
  ++result_.cycles;
  return Schedule(in);
}

void QueueSim::Record(const Decisions& d, int64_t now) {
  for (const Bind& b : d.binds) {
    const QueueSimJob* job = pending_.at(b.job);
    if (static_cast<int>(b.replicas.size()) != job->request.replicas) {
      result_.violations.push_back(absl::StrCat("job ", b.job, " bound ", b.replicas.size(), " of ",
                                                job->request.replicas, " replicas"));
    }
    pending_.erase(b.job);
    nominated_.erase(b.job);
    active_[b.job] = {job, now, b.replicas, false, 0, 0};
    QueueSimOutcome& o = result_.jobs[b.job];
    if (o.first_start_us < 0) o.first_start_us = now;
    o.starts.push_back(now);
  }
  for (const Preemption& p : d.preemptions) {
    Active& victim = active_.at(p.victim);
    victim.stopping = true;
    victim.stop_at_us = now + options_.stop_delay_us;
    victim.preempted_by = p.preemptor;
    nominated_.emplace(p.preemptor, now);
    ++result_.jobs[p.victim].preempted;
    result_.preemptions.push_back({now, p});
  }
  if (d.reserved_job != 0) {
    QueueSimOutcome& o = result_.jobs[d.reserved_job];
    if (o.reserved_start_us < 0) o.reserved_start_us = d.reserved_start_us;
  }
  for (const Node& n : cluster_.nodes()) {
    for (const Device& dev : n.devices) {
      if (dev.free_compute.units() < 0) {
        result_.violations.push_back(
            absl::StrCat("device ", dev.index, " of ", n.name, " over-committed at ", now));
      }
    }
  }
}

void QueueSim::Sample(int64_t now) {
  QueueSimSample s;
  s.t_us = now;
  for (const QueueSpec& q : queues_) s.queues[q.name];
  for (const auto& [id, job] : pending_) ++s.queues[job->queue].pending;
  for (const auto& [id, a] : active_) {
    QueueUse& u = s.queues[a.job->queue];
    ++u.running;
    u.gpu_milli += GpuMilli(a.replicas);
  }
  result_.samples.push_back(std::move(s));
  if (options_.observe) options_.observe(now, cluster_);
}

int64_t QueueSim::NextEvent(int64_t now, size_t next_arrival) const {
  int64_t event = next_arrival < jobs_.size() ? jobs_[next_arrival].submitted_us : kNever;
  for (const auto& [id, a] : active_) {
    event = std::min(event, a.stopping ? a.stop_at_us : a.started_us + RunFor(*a.job));
  }
  // Waiting jobs age: give them a cycle now and then even when nothing else happens.
  if (!pending_.empty() && options_.cycle.aging.interval_us > 0) {
    event = std::min(event, now + options_.cycle.aging.interval_us);
  }
  return event;
}

}  // namespace carve::sim
