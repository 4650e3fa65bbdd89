#include "core/sched/placement/fragmentation.h"

#include <algorithm>

namespace carve {

FragmentationModel::FragmentationModel(const Workload& workload, Measure measure)
    : measure_(measure) {
  for (const WorkloadClass& w : workload) {
    const ReplicaRequest& r = w.request;
    Class c;
    c.cpu = r.resources.cpu.units();
    c.count = r.gpu.count;
    if (r.gpu.mode == DeliveryMode::kShared) {
      c.milli = r.gpu.compute.units();
      c.share = true;
    } else if (r.gpu.mode == DeliveryMode::kExclusive && r.gpu.count > 0) {
      c.milli = kWholeGpu.units();
    } else {
      continue;  // MIG classes do not use shared or exclusive compute.
    }
    c.models = r.allowed_models;
    for (GpuModelId m : c.models) {
      if (c.allowed.size() <= static_cast<size_t>(m.value())) c.allowed.resize(m.value() + 1);
      c.allowed[m.value()] = true;
    }
    c.weight = w.weight;
    classes_.push_back(std::move(c));
  }
  // CPU-only classes count every free GPU as unusable; keep them with milli 0.
  for (const WorkloadClass& w : workload) {
    if (w.request.gpu.count == 0) {
      Class c;
      c.cpu = w.request.resources.cpu.units();
      c.weight = w.weight;
      classes_.push_back(std::move(c));
    }
  }
  if (measure_ == Measure::kCapacity) MergeClasses();
}

void FragmentationModel::MergeClasses() {
  std::vector<Class> merged;
  for (Class& c : classes_) {
    auto same = std::find_if(merged.begin(), merged.end(), [&](const Class& m) {
      return m.cpu == c.cpu && m.milli == c.milli && m.count == c.count && m.share == c.share &&
             m.models == c.models;
    });
    if (same == merged.end()) {
      merged.push_back(std::move(c));
    } else {
      same->weight += c.weight;
    }
  }
  classes_ = std::move(merged);
}

double FragmentationModel::Unusable(const Class& c, int64_t cpu_left, const Groups& groups,
                                    int64_t idle) const {
  if (c.milli == 0 || cpu_left < c.cpu) return static_cast<double>(idle);
  int fitting = 0;    // devices with room for one more replica's share
  int64_t small = 0;  // free compute on devices without that room
  int64_t slots = 0;  // replicas the devices could host (shares stack on one device)
  for (const Group& g : groups) {
    bool allowed = (g.shares || !c.share) && c.Allows(g.model);
    if (allowed && g.milli >= c.milli) {
      fitting += g.n;
      slots += (c.count == 1 ? g.milli / c.milli : 1) * g.n;
    } else {
      small += g.milli * g.n;
    }
  }
  if (fitting < c.count) return static_cast<double>(idle);
  if (measure_ == Measure::kFgd) return static_cast<double>(small);
  int64_t replicas = slots / c.count;
  if (c.cpu > 0) replicas = std::min(replicas, cpu_left / c.cpu);
  return static_cast<double>(idle - replicas * c.count * c.milli);
}

double FragmentationModel::NodeFragmentation(int64_t cpu_left,
                                             absl::Span<const FreeGpu> gpus) const {
  int64_t idle = 0;
  Groups groups;
  for (const FreeGpu& g : gpus) {
    idle += g.milli;
    auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return x.model == g.model && x.milli == g.milli && x.shares == g.shares;
    });
    if (same == groups.end()) {
      groups.push_back({g.model, g.milli, g.shares, 1});
    } else {
      ++same->n;
    }
  }
  if (idle == 0) return 0;
  double frag = 0;
  for (const Class& c : classes_) frag += c.weight * Unusable(c, cpu_left, groups, idle);
  return frag;
}

double FragmentationModel::NodeFragmentation(const Node& node) const {
  FreeGpuList gpus = FreeGpus(node);
  return NodeFragmentation(node.free.cpu.units(), gpus);
}

FragmentationModel::FreeGpuList FragmentationModel::FreeGpus(const Node& node) {
  FreeGpuList gpus;
  for (const Device& d : node.devices) {
    // Partition and unschedulable devices offer no free compute to shares or whole requests.
    bool usable = d.mode != DeliveryMode::kPartition && d.schedulable();
    gpus.push_back({d.model, usable ? d.free_compute.units() : 0, d.mode == DeliveryMode::kShared});
  }
  return gpus;
}

void FragmentationModel::Take(FreeGpuList& gpus, const std::vector<DeviceGrant>& grants) {
  for (const DeviceGrant& g : grants) {
    if (g.mig_profile >= 0) continue;
    gpus[g.device].milli -= g.compute.units();
  }
}

Workload TypicalClasses(const Workload& workload, double coverage) {
  Workload sorted = workload;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const WorkloadClass& a, const WorkloadClass& b) { return a.weight > b.weight; });
  double total = 0;
  for (const WorkloadClass& w : sorted) total += w.weight;
  Workload out;
  double covered = 0;
  for (const WorkloadClass& w : sorted) {
    if (covered >= coverage * total * (1 - 1e-12)) break;
    out.push_back(w);
    covered += w.weight;
  }
  for (WorkloadClass& w : out) w.weight /= covered;
  return out;
}

}  // namespace carve
