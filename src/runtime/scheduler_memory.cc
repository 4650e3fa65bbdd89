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

// Adds the nodes where `before` held something that `after` does not; whether there was any.
bool ReleasedNodes(const std::vector<ReplicaPlacement>& before,
                   const std::vector<ReplicaPlacement>& after, std::set<int64_t>& nodes) {
  std::vector<Piece> was = Taken(before), is = Taken(after), gone;
  std::set_difference(was.begin(), was.end(), is.begin(), is.end(), std::back_inserter(gone));
  for (const Piece& p : gone) nodes.insert(std::get<0>(p));
  return !gone.empty();
}

}  // namespace

std::string SchedulerMemory::FullCycleReason(
    int64_t now, int64_t every_us, uint64_t revision, const Cluster& nodes,
    const std::map<int64_t, std::vector<ReplicaPlacement>>& now_held,
    const std::set<int64_t>& now_stopping, Released& released) const {
  if (!valid) return "no earlier cycle to build on";
  if (!full_next.empty()) return full_next;
  if (now - full_us >= std::max(every_us, 10 * full_took_us)) return "interval";
  if (revision != config_revision) return "queues, projects or classes changed";
  if (!base || !(*base == nodes)) return "a node changed";
  if (!std::includes(stopping.begin(), stopping.end(), now_stopping.begin(), now_stopping.end())) {
    return "a running job began stopping";
  }
  // Jobs bound since hold more, which parks nothing wrongly; what a job holds less of is released.
  static const std::vector<ReplicaPlacement> kNothing;
  for (const auto& [job, was] : held) {
    auto it = now_held.find(job);
    const std::vector<ReplicaPlacement>& is = it == now_held.end() ? kNothing : it->second;
    if (is == was.placements) continue;
    // What it gave back was also charged to its queue's quota.
    if (ReleasedNodes(was.placements, is, released.nodes)) released.queues.insert(was.queue);
  }
  return "";
}

std::set<size_t> SchedulerMemory::ShapesThatFit(const Cluster& cluster,
                                                const Released& released) const {
  std::set<size_t> fit;
  for (size_t s = 0; s < shapes.size(); ++s) {
    const ReplicaRequest& replica = shapes[s];
    for (int64_t n : released.nodes) {
      const Node& node = cluster.node(NodeId(n));
      if (CheckNode(cluster, node, replica) != FitReason::kFits) continue;
      if (replica.gpu.none() || !DeviceOptions(cluster, node, replica).empty()) {
        fit.insert(s);
        break;
      }
    }
  }
  return fit;
}

void SchedulerMemory::Park(int64_t job, uint64_t revision, const ReplicaRequest& request,
                           bool quota) {
  auto [it, fresh] = shape_index.try_emplace(request, shapes.size());
  if (fresh) shapes.push_back(request);
  parked[job] = {revision, it->second, quota};
}

}  // namespace carve
