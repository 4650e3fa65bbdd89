#include "core/sched/queueing/backfill.h"

#include <algorithm>

namespace carve {
namespace {

// Whether `job` fits once the first `released` holdings have ended.
bool FitsAfter(const Cluster& cluster, const PlacementPolicy* policy, const JobRequest& job,
               const std::vector<Holding>& running, size_t released, Cluster* out) {
  Cluster future = cluster;
  for (size_t i = 0; i < released; ++i) {
    for (const ReplicaPlacement& p : *running[i].replicas) ReleaseReplica(future, p);
  }
  Placer placer(&future, policy, 0, Placer::Strategy::kScan);
  PlaceResult r = placer.Place(job);
  if (!r.placed) return false;
  placer.Release(r.replicas);
  if (out != nullptr) *out = std::move(future);
  return true;
}

}  // namespace

Reservation::Reservation(const Cluster& future, const PlacementPolicy* policy, int64_t job_id,
                         const JobRequest& job, int64_t start_us)
    : future_(future),
      placer_(&future_, policy, 0, Placer::Strategy::kScan),
      job_(job_id),
      request_(job),
      start_us_(start_us) {}

std::unique_ptr<Reservation> Reservation::Make(const Cluster& cluster,
                                               const PlacementPolicy* policy, int64_t job_id,
                                               const JobRequest& job,
                                               std::vector<Holding> running) {
  std::stable_sort(running.begin(), running.end(),
                   [](const Holding& a, const Holding& b) { return a.end_us < b.end_us; });
  if (!FitsAfter(cluster, policy, job, running, running.size(), nullptr)) return nullptr;
  // Feasibility only grows as jobs end: binary search the shortest prefix of ends.
  size_t lo = 0, hi = running.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (FitsAfter(cluster, policy, job, running, mid, nullptr)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  // Everything that has ended by the reserved start is free then.
  int64_t start = lo == 0 ? 0 : running[lo - 1].end_us;
  while (lo < running.size() && running[lo].end_us <= start) ++lo;
  Cluster future = cluster;
  FitsAfter(cluster, policy, job, running, lo, &future);
  return std::make_unique<Reservation>(future, policy, job_id, job, start == kNoEnd ? -1 : start);
}

bool Reservation::Allows(const std::vector<ReplicaPlacement>& replicas, int64_t end_us) {
  if (start_us_ > 0 && end_us <= start_us_) return true;
  Record(replicas, kNoEnd);
  PlaceResult r = placer_.Place(request_);
  if (r.placed) placer_.Release(r.replicas);
  placer_.Release(replicas);
  return r.placed;
}

void Reservation::Record(const std::vector<ReplicaPlacement>& replicas, int64_t end_us) {
  if (start_us_ > 0 && end_us <= start_us_) return;
  for (const ReplicaPlacement& p : replicas) placer_.Apply(p);
}

}  // namespace carve
