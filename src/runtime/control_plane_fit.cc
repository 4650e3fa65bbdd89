// Submission's last check: could any arrangement of the registered nodes, with nothing else on
// them, hold the job? A job that asks for 8 T4s on a cluster with two, or a model no node has,
// would otherwise wait forever.
#include "absl/strings/str_cat.h"
#include "core/sched/placement/placer.h"
#include "core/sched/placement/policies.h"
#include "core/sched/queueing/explain.h"
#include "runtime/control_plane.h"
#include "runtime/cycle_plan.h"

namespace carve {

namespace {

// The node as it would be with every job gone, cordons, windows, faults and enforcement outages
// lifted: what is installed. A false refusal is worse than a missed one. Dead nodes (declared so by
// an admin) are left out; nodes that went silent are in, as they may come back.
Node EmptyNode(const GpuCatalog& catalog, const std::string& name, const NodeRecord& rec,
               const std::vector<PoolSelector>& pools) {
  Node n = NodeFromRecord(catalog, name, rec, pools);
  n.state = NodeState::kReady;
  std::erase_if(n.taints, [](const Taint& t) { return t.key == "carve.io/maintenance"; });
  for (Device& d : n.devices) {
    d.state = DeviceState::kAvailable;
    d.health = DeviceHealth::kHealthy;
    d.share_caps_enforced = true;  // an MPS daemon that is down now may be back soon
  }
  return n;
}

}  // namespace

absl::Status ControlPlane::CheckFitsEmptyCluster(const JobSpec& spec, JobRequest request) const {
  Cluster empty(catalog_);
  const std::vector<PoolSelector> pools = config_.Pools();
  for (const auto& [name, rec] : nodes_) {
    if (rec.state != NodeRecordState::kDead) empty.AddNode(EmptyNode(*catalog_, name, rec, pools));
  }
  if (empty.nodes().empty()) return absl::OkStatus();  // no node yet: the cluster is forming
  if (const QueueConfig* q = config_.Queue(spec.queue); q != nullptr && !q->spec.pool.empty()) {
    request.replica.pool = q->spec.pool;
  }
  // Replicas are alike, so placing them one after another on the empty cluster finds room for
  // all of them whenever any arrangement has it.
  std::unique_ptr<PlacementPolicy> first_fit = MakeFirstFitPolicy();
  Placer placer(&empty, first_fit.get(), 0, Placer::Strategy::kScan);
  PlaceResult placed = placer.Place(request);
  if (placed.placed) return absl::OkStatus();
  Placer one(&empty, first_fit.get(), 0, Placer::Strategy::kScan);
  JobRequest single = request;
  single.replicas = 1;
  const bool one_fits = request.replicas > 1 && one.Place(single).placed;
  std::string why = one_fits
                        ? absl::StrCat("a replica fits, but not ", request.replicas, " at once")
                        : absl::StrCat(PlacementGate(empty, placed.report).summary, "; ",
                                       NearestFit(empty, request.replica));
  return absl::InvalidArgumentError(absl::StrCat(
      "no node could run this job even with the whole cluster idle (", why,
      "); it would wait forever. Ask for what the nodes have (`carve nodes`), or submit with "
      "--allow-unschedulable (API: ?allow_unschedulable=true) to queue it for nodes yet to "
      "join"));
}

}  // namespace carve
