#include "runtime/scheduler_memory.h"

#include <algorithm>
#include <tuple>

namespace carve {
namespace {

// What a job's placements take from the cluster (which node, device, slice and amount), in a
// canonical order: a placement rebuilt from the job's record compares equal to the one planned.
std::vector<std::tuple<int64_t, int, int64_t, int64_t, int, int>> Taken(
    const std::vector<ReplicaPlacement>& placements) {
  std::vector<std::tuple<int64_t, int, int64_t, int64_t, int, int>> out;
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

}  // namespace

std::string SchedulerMemory::FullCycleReason(
    int64_t now, int64_t every_us, uint64_t revision, const Cluster& nodes,
    const std::map<int64_t, std::vector<ReplicaPlacement>>& now_held,
    const std::set<int64_t>& now_stopping) const {
  if (!valid) return "no earlier cycle to build on";
  if (now - full_us >= std::max(every_us, 10 * full_took_us)) return "interval";
  if (revision != config_revision) return "queues, projects or classes changed";
  if (!base || !(*base == nodes)) return "a node changed";
  // Released: a job that held devices holds less, or began to stop (its claimants may now use
  // them). Jobs bound since hold more, which parks nothing wrongly.
  for (const auto& [job, placements] : held) {
    auto it = now_held.find(job);
    if (it == now_held.end() ||
        (it->second != placements && Taken(it->second) != Taken(placements))) {
      return "a job released devices";
    }
    if (!stopping.count(job) && now_stopping.count(job)) return "a job began to stop";
  }
  return "";
}

}  // namespace carve
