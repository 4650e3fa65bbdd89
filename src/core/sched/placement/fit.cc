#include "core/sched/placement/fit.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"

namespace carve {
namespace {

bool Tolerates(const ReplicaRequest& replica, const Taint& taint) {
  return std::find(replica.tolerations.begin(), replica.tolerations.end(), taint) !=
         replica.tolerations.end();
}

bool ServesWhole(const Device& d, const ReplicaRequest& r) {
  return d.schedulable() && d.idle() &&
         (d.mode == DeliveryMode::kExclusive || d.mode == DeliveryMode::kShared) &&
         DeviceTolerated(d, r);
}

bool ServesShare(const Cluster& cluster, const Device& d, const ReplicaRequest& r) {
  return d.schedulable() && DeviceTolerated(d, r) && d.mode == DeliveryMode::kShared &&
         d.free_compute >= r.gpu.compute && d.free_memory >= ShareMemory(cluster, d, r) &&
         ShareGroupAllows(d, r) && (d.share_caps_enforced || r.best_effort);
}

// Whether a device in `d`'s delivery mode can serve the request's (a shared device also serves
// whole-device requests).
bool ModeServes(const Device& d, const ReplicaRequest& r) {
  return d.mode == r.gpu.mode ||
         (r.gpu.mode == DeliveryMode::kExclusive && d.mode == DeliveryMode::kShared);
}

std::vector<MigSlot> Layout(const Device& d) {
  std::vector<MigSlot> layout;
  layout.reserve(d.instances.size());
  for (const MigInstance& i : d.instances) layout.push_back({i.profile, i.start});
  return layout;
}

// Free MIG slots of `profile` on `d`: existing unallocated instances first, then (dynamic
// layouts) placements a new instance could take.
std::vector<DeviceGrant> MigOptions(const Cluster& cluster, const Device& d, int profile) {
  std::vector<DeviceGrant> out;
  for (const MigInstance& i : d.instances) {
    if (!i.allocated && i.profile == profile) {
      out.push_back({d.index, {}, {}, profile, i.start, false});
    }
  }
  if (d.dynamic_layout) {
    for (int start : FreeMigStarts(cluster.catalog().model(d.model), Layout(d), profile)) {
      out.push_back({d.index, {}, {}, profile, start, true});
    }
  }
  return out;
}

struct GpuScan {
  bool any_model = false;
  bool any_mode = false;
  bool any_schedulable = false;
  bool any_tolerated = false;  // schedulable and without a taint the replica does not tolerate
};

GpuScan ScanDevices(const Node& node, const ReplicaRequest& replica) {
  GpuScan scan;
  for (const Device& d : node.devices) {
    if (!ModelAllowed(replica, d.model)) continue;
    scan.any_model = true;
    if (!ModeServes(d, replica)) continue;
    scan.any_mode = true;
    scan.any_schedulable |= d.schedulable();
    scan.any_tolerated |= d.schedulable() && DeviceTolerated(d, replica);
  }
  return scan;
}

FitReason CheckGpus(const Cluster& cluster, const Node& node, const ReplicaRequest& replica) {
  const GpuRequest& gpu = replica.gpu;
  if (gpu.none()) return FitReason::kFits;
  GpuScan scan = ScanDevices(node, replica);
  if (!scan.any_model) return FitReason::kGpuModel;
  if (!scan.any_mode) return FitReason::kGpuMode;
  if (!scan.any_schedulable) return FitReason::kGpuUnhealthy;
  // Every device it could use is held by a taint it does not tolerate (a reservation's).
  if (!scan.any_tolerated) return FitReason::kTaint;
  int count = 0;
  bool compute_ok = false, memory_ok = false, group_ok = false;
  for (const Device& d : node.devices) {
    if (count >= gpu.count) break;
    if (!ModelAllowed(replica, d.model) || !DeviceTolerated(d, replica)) continue;
    switch (gpu.mode) {
      case DeliveryMode::kExclusive:
        count += ServesWhole(d, replica);
        break;
      case DeliveryMode::kShared:
        if (d.schedulable() && d.mode == DeliveryMode::kShared && d.free_compute >= gpu.compute) {
          compute_ok = true;
          if (d.free_memory < ShareMemory(cluster, d, replica)) break;
          memory_ok = true;
          if (!ShareGroupAllows(d, replica)) break;
          group_ok = true;
          count += d.share_caps_enforced || replica.best_effort;
        }
        break;
      case DeliveryMode::kPartition:
        if (d.schedulable() && d.mode == DeliveryMode::kPartition) {
          auto profile = cluster.catalog().FindProfile(d.model, gpu.profile);
          if (profile.ok()) count += static_cast<int>(MigOptions(cluster, d, *profile).size());
        }
        break;
    }
  }
  if (count >= gpu.count) return FitReason::kFits;
  switch (gpu.mode) {
    case DeliveryMode::kExclusive:
      return FitReason::kGpuCount;
    case DeliveryMode::kShared:
      return !compute_ok  ? FitReason::kGpuShare
             : !memory_ok ? FitReason::kGpuMemory
             : !group_ok  ? FitReason::kGpuShareGroup
                          : FitReason::kGpuCapsNotEnforced;
    case DeliveryMode::kPartition:
      return FitReason::kMigProfile;
  }
  return FitReason::kGpuCount;
}

// Devices of `node` that could serve `replica` were every allocation released.
int Servable(const Node& node, const ReplicaRequest& replica) {
  int n = 0;
  for (const Device& d : node.devices) {
    n += ModeServes(d, replica) && d.schedulable() && ModelAllowed(replica, d.model) &&
         DeviceTolerated(d, replica);
  }
  return n;
}

std::vector<std::vector<DeviceGrant>> WholeOptions(const Node& node, const ReplicaRequest& r) {
  absl::InlinedVector<const Device*, 16> idle;
  for (const Device& d : node.devices) {
    if (ModelAllowed(r, d.model) && ServesWhole(d, r)) idle.push_back(&d);
  }
  // Exclusive-mode devices first, so idle shared devices stay free for shares.
  std::stable_sort(idle.begin(), idle.end(), [](const Device* a, const Device* b) {
    return (a->mode != DeliveryMode::kExclusive) < (b->mode != DeliveryMode::kExclusive);
  });
  std::vector<DeviceGrant> grants;
  for (int i = 0; i < r.gpu.count; ++i) {
    grants.push_back({idle[i]->index, kWholeGpu, idle[i]->free_memory, -1, -1, false});
  }
  return {grants};
}

std::vector<std::vector<DeviceGrant>> ShareOptions(const Cluster& cluster, const Node& node,
                                                   const ReplicaRequest& r) {
  std::vector<std::vector<DeviceGrant>> out;
  absl::InlinedVector<const Device*, 16> seen;
  for (const Device& d : node.devices) {
    if (!ModelAllowed(r, d.model) || !ServesShare(cluster, d, r)) continue;
    bool duplicate = std::any_of(seen.begin(), seen.end(), [&](const Device* s) {
      return s->model == d.model && s->free_compute == d.free_compute &&
             s->free_memory == d.free_memory && s->share_group == d.share_group;
    });
    if (duplicate) continue;
    seen.push_back(&d);
    out.push_back(
        {{d.index, r.gpu.compute, ShareMemory(cluster, d, r), -1, -1, false, r.share_group}});
  }
  return out;
}

std::vector<std::vector<DeviceGrant>> PartitionOptions(const Cluster& cluster, const Node& node,
                                                       const ReplicaRequest& r) {
  std::vector<DeviceGrant> slots;
  for (const Device& d : node.devices) {
    if (!ModelAllowed(r, d.model) || !d.schedulable() || d.mode != DeliveryMode::kPartition ||
        !DeviceTolerated(d, r)) {
      continue;
    }
    auto profile = cluster.catalog().FindProfile(d.model, r.gpu.profile);
    if (!profile.ok()) continue;
    for (DeviceGrant& g : MigOptions(cluster, d, *profile)) slots.push_back(g);
  }
  if (r.gpu.count == 1) {
    std::vector<std::vector<DeviceGrant>> out;
    for (const DeviceGrant& g : slots) out.push_back({g});
    return out;
  }
  // Several instances: take slots in order, skipping new placements that overlap ones already
  // taken on the same device.
  Node scratch = node;
  std::vector<DeviceGrant> grants;
  for (const DeviceGrant& g : slots) {
    if (static_cast<int>(grants.size()) == r.gpu.count) break;
    Device& d = scratch.devices[g.device];
    if (g.mig_created) {
      std::vector<int> free =
          FreeMigStarts(cluster.catalog().model(d.model), Layout(d), g.mig_profile);
      if (std::find(free.begin(), free.end(), g.mig_start) == free.end()) continue;
      d.instances.push_back({g.mig_profile, g.mig_start, true, true});
    }
    grants.push_back(g);
  }
  if (static_cast<int>(grants.size()) < r.gpu.count) return {};
  return {grants};
}

MigInstance* FindInstance(Device& d, int profile, int start) {
  for (MigInstance& i : d.instances) {
    if (i.profile == profile && i.start == start) return &i;
  }
  return nullptr;
}

}  // namespace

MemMib ShareMemory(const Cluster& cluster, const Device& d, const ReplicaRequest& replica) {
  const GpuRequest& gpu = replica.gpu;
  if (gpu.memory.units() > 0 || !replica.cap_memory) return gpu.memory;
  int64_t total = cluster.catalog().model(d.model).memory.units();
  return MemMib(std::max<int64_t>(1, total * gpu.compute.units() / kWholeGpu.units()));
}

bool ShareGroupAllows(const Device& d, const ReplicaRequest& replica) {
  return d.share_group.empty() || replica.share_group.empty() ||
         d.share_group == replica.share_group;
}

bool DeviceToleratedSlow(const Device& d, const ReplicaRequest& replica) {
  return std::all_of(d.taints.begin(), d.taints.end(),
                     [&](const Taint& t) { return Tolerates(replica, t); });
}

bool ModelAllowed(const ReplicaRequest& replica, GpuModelId model) {
  return replica.allowed_models.empty() ||
         std::find(replica.allowed_models.begin(), replica.allowed_models.end(), model) !=
             replica.allowed_models.end();
}

FitReason CheckNode(const Cluster& cluster, const Node& node, const ReplicaRequest& replica) {
  if (node.state != NodeState::kReady) return FitReason::kNodeNotReady;
  if (!replica.pool.empty() && replica.pool != node.pool) return FitReason::kPool;
  for (const auto& [key, value] : replica.node_selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return FitReason::kNodeSelector;
  }
  for (const Taint& t : node.taints) {
    if (!Tolerates(replica, t)) return FitReason::kTaint;
  }
  const Resources& need = replica.resources;
  if (node.free.cpu < need.cpu) return FitReason::kCpu;
  if (node.free.memory < need.memory) return FitReason::kMemory;
  if (node.free.storage < need.storage) return FitReason::kStorage;
  if (node.free.network < need.network) return FitReason::kNetwork;
  if (!need.extra.empty() && ExtraShort(node.free.extra, need.extra)) return FitReason::kExtra;
  if (replica.max_per_node > 0) {
    auto it = node.apps.find(replica.app);
    if (it != node.apps.end() && it->second >= replica.max_per_node) return FitReason::kSpread;
  }
  return CheckGpus(cluster, node, replica);
}

std::vector<std::vector<DeviceGrant>> DeviceOptions(const Cluster& cluster, const Node& node,
                                                    const ReplicaRequest& replica) {
  if (replica.gpu.none()) return {{}};
  switch (replica.gpu.mode) {
    case DeliveryMode::kExclusive:
      return WholeOptions(node, replica);
    case DeliveryMode::kShared:
      return ShareOptions(cluster, node, replica);
    case DeliveryMode::kPartition:
      return PartitionOptions(cluster, node, replica);
  }
  return {};
}

std::optional<int> GpuKind(const std::vector<DeviceGrant>& grants) {
  if (grants.empty()) return std::nullopt;
  if (grants[0].mig_profile >= 0) return -1;
  if (grants[0].compute < kWholeGpu) return 0;
  return static_cast<int>(grants.size());
}

void ApplyReplica(Cluster& cluster, const ReplicaPlacement& placement) {
  Node& node = cluster.mutable_node(placement.node);
  node.free -= placement.resources;
  if (!placement.app.empty()) ++node.apps[placement.app];
  if (auto kind = GpuKind(placement.grants)) ++node.kinds[*kind];
  for (const DeviceGrant& g : placement.grants) {
    Device& d = node.devices[g.device];
    ++d.holders;
    if (g.mig_profile < 0) {
      d.free_compute -= g.compute;
      d.free_memory -= g.memory;
      if (!g.share_group.empty()) d.share_group = g.share_group;
    } else if (g.mig_created) {
      d.instances.push_back({g.mig_profile, g.mig_start, true, true});
    } else {
      FindInstance(d, g.mig_profile, g.mig_start)->allocated = true;
    }
  }
}

void ReleaseReplica(Cluster& cluster, const ReplicaPlacement& placement) {
  Node& node = cluster.mutable_node(placement.node);
  node.free += placement.resources;
  if (!placement.app.empty()) {
    auto it = node.apps.find(placement.app);
    if (it != node.apps.end() && --it->second <= 0) node.apps.erase(it);
  }
  if (auto kind = GpuKind(placement.grants); kind && --node.kinds[*kind] == 0) {
    node.kinds.erase(*kind);
  }
  for (const DeviceGrant& g : placement.grants) {
    Device& d = node.devices[g.device];
    --d.holders;
    if (g.mig_profile < 0) {
      d.free_compute += g.compute;
      d.free_memory += g.memory;
      if (d.holders == 0) d.share_group.clear();
      continue;
    }
    MigInstance* instance = FindInstance(d, g.mig_profile, g.mig_start);
    if (g.mig_created) {
      d.instances.erase(d.instances.begin() + (instance - d.instances.data()));
    } else {
      instance->allocated = false;
    }
  }
}

bool RuledOut(const Node& node, const ReplicaRequest& replica, FitReason reason) {
  switch (reason) {
    case FitReason::kNodeNotReady:
    case FitReason::kPool:
    case FitReason::kNodeSelector:
    case FitReason::kTaint:
    case FitReason::kGpuModel:
    case FitReason::kGpuMode:
    case FitReason::kGpuUnhealthy:
      return true;
    case FitReason::kFits:
    case FitReason::kSpread:
      return false;
    default:
      break;
  }
  const Resources& need = replica.resources;
  if (node.capacity.cpu < need.cpu || node.capacity.memory < need.memory ||
      node.capacity.storage < need.storage || node.capacity.network < need.network ||
      (!need.extra.empty() && ExtraShort(node.capacity.extra, need.extra))) {
    return true;
  }
  if (replica.gpu.none()) return false;
  int servable = Servable(node, replica);
  if (replica.gpu.mode == DeliveryMode::kPartition) return servable == 0;
  return servable < replica.gpu.count;
}

absl::string_view ToString(FitReason reason) {
  static constexpr std::array<absl::string_view, kFitReasonCount> kNames = {
      "fits",
      "node-not-ready",
      "pool",
      "node-selector",
      "taint",
      "insufficient-cpu",
      "insufficient-memory",
      "insufficient-storage",
      "insufficient-network",
      "insufficient-extra-resource",
      "spread-limit",
      "gpu-model-not-allowed",
      "no-gpu-in-mode",
      "gpu-unhealthy",
      "insufficient-whole-gpus",
      "insufficient-gpu-share",
      "insufficient-gpu-memory",
      "no-mig-placement",
      "gpu-serves-other-tenant",
      "gpu-caps-not-enforced"};
  return kNames[static_cast<int>(reason)];
}

}  // namespace carve
