// Submission's last check: could any arrangement of the registered nodes, with nothing else on
// them, hold the job? A job that asks for 8 T4s on a cluster with two, or a model no node has,
// would otherwise wait forever.
#include "absl/hash/hash.h"
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

// Everything EmptyNode reads of the nodes, and the pools (the configuration's revision): the
// cluster built from them is kept until this changes. Heartbeats change none of it.
uint64_t EmptyClusterKey(const std::map<std::string, NodeRecord>& nodes, uint64_t config) {
  uint64_t key = absl::HashOf(config, nodes.size());
  for (const auto& [name, rec] : nodes) {
    key = absl::HashOf(key, name, rec.state == NodeRecordState::kDead, rec.cpu_milli,
                       rec.memory_mib, rec.labels, rec.extra);
    for (const DiscoveredGpu& g : rec.gpus) {
      key = absl::HashOf(key, g.index, g.model, g.mode, g.memory_mib, g.mig_enabled,
                         g.dynamic_layout);
      for (const DiscoveredMigInstance& m : g.mig_instances)
        key = absl::HashOf(key, m.profile, m.start);
    }
  }
  return key;
}

}  // namespace

// The idle cluster and a placer indexed over it are kept between submissions: at 1,000 nodes
// building the cluster per submission took a third of the server's CPU under load, and at 5,000
// reading every node's shape to see whether it changed still took a fifth (docs/scale.md). The
// shapes are read again at most once a second, and before any refusal: a node that joined a
// moment ago is never missed by a refusal, and one that left a moment ago can only let through a
// job that then waits, explained.
struct ControlPlane::FitCache {
  explicit FitCache(const GpuCatalog* catalog) : cluster(catalog) {}
  uint64_t key = 0;
  int64_t keyed_us = 0;
  Cluster cluster;
  std::unique_ptr<PlacementPolicy> policy = MakeFirstFitPolicy();
  std::unique_ptr<Placer> placer;
};

namespace {
constexpr int64_t kFitKeyEveryUs = 1'000'000;
}  // namespace

bool ControlPlane::RefreshFit(int64_t now) const {
  const uint64_t key = EmptyClusterKey(nodes_, config_.revision());
  if (fit_ && fit_->key == key) {
    fit_->keyed_us = now;
    return false;
  }
  fit_ = std::make_shared<FitCache>(catalog_);
  fit_->key = key;
  fit_->keyed_us = now;
  const std::vector<PoolSelector> pools = config_.Pools();
  for (const auto& [name, rec] : nodes_) {
    if (rec.state != NodeRecordState::kDead) {
      fit_->cluster.AddNode(EmptyNode(*catalog_, name, rec, pools));
    }
  }
  fit_->placer = std::make_unique<Placer>(&fit_->cluster, fit_->policy.get(), 0);
  return true;
}

absl::Status ControlPlane::CheckFitsEmptyCluster(const JobSpec& spec, JobRequest request) const {
  if (const QueueConfig* q = config_.Queue(spec.queue); q != nullptr && !q->spec.pool.empty()) {
    request.replica.pool = q->spec.pool;
  }
  const int64_t now = now_();
  const bool due = !fit_ || now - fit_->keyed_us >= kFitKeyEveryUs || now < fit_->keyed_us;
  if (due) RefreshFit(now);
  bool checked = due;  // the shapes were read for this submission
  // Replicas are alike, so placing them one after another on the empty cluster finds room for
  // all of them whenever any arrangement has it; releasing them leaves it idle.
  PlaceResult placed;
  for (;;) {
    if (fit_->cluster.nodes().empty()) return absl::OkStatus();  // the cluster is forming
    placed = fit_->placer->Place(request);
    if (placed.placed) {
      fit_->placer->Release(placed.replicas);
      return absl::OkStatus();
    }
    if (checked) break;  // refused on the nodes as they are now
    checked = true;
    if (!RefreshFit(now)) break;
  }
  const Cluster& empty = fit_->cluster;
  std::unique_ptr<PlacementPolicy> first_fit = MakeFirstFitPolicy();
  Cluster scratch = empty;
  Placer one(&scratch, first_fit.get(), 0, Placer::Strategy::kScan);
  JobRequest single = request;
  single.replicas = 1;
  const bool one_fits = request.replicas > 1 && one.Place(single).placed;
  std::string why = one_fits
                        ? absl::StrCat("a replica fits, but not ", request.replicas,
                                       " at once: ", PlacementGate(empty, placed.report).summary)
                        : absl::StrCat(PlacementGate(empty, placed.report).summary, "; ",
                                       NearestFit(empty, request.replica));
  return absl::InvalidArgumentError(absl::StrCat(
      "no node could run this job even with the whole cluster idle (", why,
      "); it would wait forever. Ask for what the nodes have (`carve nodes`), or submit with "
      "--allow-unschedulable (API: ?allow_unschedulable=true) to queue it for nodes yet to "
      "join"));
}

}  // namespace carve
