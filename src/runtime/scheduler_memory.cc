#include "runtime/scheduler_memory.h"

#include <algorithm>
#include <tuple>

namespace carve {
namespace {

using Piece = std::tuple<int64_t, int, int64_t, int64_t, int, int>;

// What a job's placements take from the cluster (which node, device, slice and amount), in a
// canonical order: a placement rebuilt from the job's record compares equal to the one planned.
std::vector<Piece> Taken(const std::vector<ReplicaPlacement>& placements) {
  std::vector<Piece> out;
  for (const ReplicaPlacement& p : placements) {
    out.emplace_back(p.node.value(), -1, p.resources.cpu.units(), p.resources.memory.units(), -1,
                     -1);
    for (const DeviceGrant& g : p.grants) {
      out.emplace_back(p.node.value(), g.device, g.compute.units(), g.memory.units(), g.mig_profile,
                       g.mig_start);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A device's allocations, its instances in a canonical order.
bool SameAllocations(Device a, Device b) {
  auto order = [](const MigInstance& x, const MigInstance& y) {
    return std::tie(x.start, x.profile, x.allocated, x.transient) <
           std::tie(y.start, y.profile, y.allocated, y.transient);
  };
  std::sort(a.instances.begin(), a.instances.end(), order);
  std::sort(b.instances.begin(), b.instances.end(), order);
  return a.free_compute == b.free_compute && a.free_memory == b.free_memory &&
         a.holders == b.holders && a.share_group == b.share_group && a.instances == b.instances;
}

}  // namespace

bool SameHoldings(const std::vector<ReplicaPlacement>& a, const std::vector<ReplicaPlacement>& b) {
  return a == b || Taken(a) == Taken(b);
}

bool ReleasedNodes(const std::vector<ReplicaPlacement>& before,
                   const std::vector<ReplicaPlacement>& after, std::set<int64_t>& nodes) {
  std::vector<Piece> was = Taken(before), is = Taken(after), gone;
  std::set_difference(was.begin(), was.end(), is.begin(), is.end(), std::back_inserter(gone));
  for (const Piece& p : gone) nodes.insert(std::get<0>(p));
  return !gone.empty();
}

std::string HoldingsDiffer(const Cluster& a, const Cluster& b) {
  if (a.size() != b.size()) return "(the node count)";
  for (size_t i = 0; i < a.size(); ++i) {
    const Node& x = a.node(NodeId(static_cast<int64_t>(i)));
    const Node& y = b.node(NodeId(static_cast<int64_t>(i)));
    bool same = x.name == y.name && x.free == y.free && x.kinds == y.kinds && x.apps == y.apps &&
                x.devices.size() == y.devices.size();
    for (size_t d = 0; same && d < x.devices.size(); ++d) {
      same = SameAllocations(x.devices[d], y.devices[d]);
    }
    if (!same) return x.name;
  }
  return "";
}

bool SchedulerMemory::FullDue(int64_t now, int64_t every_us) const {
  return now - full_us >= std::max(every_us, 10 * full_took_us);
}

std::string SchedulerMemory::FullCycleReason(int64_t now, int64_t every_us, uint64_t revision,
                                             bool nodes_changed,
                                             const std::set<int64_t>& now_stopping) const {
  if (!valid) return "no earlier cycle to build on";
  if (FullDue(now, every_us)) return "interval";
  if (revision != config_revision) return "queues, projects or classes changed";
  if (nodes_changed) return "a node changed";
  if (!std::includes(stopping.begin(), stopping.end(), now_stopping.begin(), now_stopping.end())) {
    return "a running job began stopping";
  }
  return "";
}

std::map<size_t, int> SchedulerMemory::RoomFor(Cluster& cluster, const Released& released,
                                               int limit) const {
  std::map<size_t, int> room;
  for (size_t s = 0; s < shapes.size(); ++s) {
    const ReplicaRequest& replica = shapes[s];
    std::vector<ReplicaPlacement> taken;
    for (auto n = released.nodes.begin();
         n != released.nodes.end() && static_cast<int>(taken.size()) < limit; ++n) {
      const NodeId id(*n);
      while (static_cast<int>(taken.size()) < limit &&
             CheckNode(cluster, cluster.node(id), replica) == FitReason::kFits) {
        std::vector<DeviceGrant> grants;
        if (!replica.gpu.none()) {
          std::vector<std::vector<DeviceGrant>> options =
              DeviceOptions(cluster, cluster.node(id), replica);
          if (options.empty()) break;
          grants = std::move(options.front());
        }
        taken.push_back({id, replica.resources, std::move(grants), replica.app});
        ApplyReplica(cluster, taken.back());
      }
    }
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) ReleaseReplica(cluster, *it);
    if (!taken.empty()) room[s] = static_cast<int>(taken.size());
  }
  return room;
}

void SchedulerMemory::Park(const PendingJob& job, uint64_t revision, bool quota, bool room) {
  auto [it, fresh] = shape_index.try_emplace(job.request.replica, shapes.size());
  if (fresh) shapes.push_back(job.request.replica);
  parked[job.id] = {revision,         it->second,        quota, room, job.queue, job.priority,
                    job.submitted_us, job.max_runtime_us};
}

}  // namespace carve
