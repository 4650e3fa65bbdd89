#include "core/sched/placement/fragmentation.h"

#include <algorithm>

namespace carve {
namespace {

// floor(a / b) for 0 < b <= a. Through doubles while both are below 2^52, where the rounded
// quotient never reaches the next integer (so truncating it is exact), because a 64-bit integer
// division costs several times as much and this runs for every class on every evaluation.
int64_t WholeTimes(int64_t a, int64_t b) {
  constexpr int64_t kExact = int64_t{1} << 52;
  if (a >= kExact) return a / b;
  return static_cast<int64_t>(static_cast<double>(a) / static_cast<double>(b));
}

}  // namespace

FragmentationModel::FragmentationModel(const Workload& workload, Measure measure)
    : measure_(measure) {
  for (const WorkloadClass& w : workload) {
    const ReplicaRequest& r = w.request;
    Shape shape;
    shape.count = r.gpu.count;
    if (r.gpu.mode == DeliveryMode::kShared) {
      shape.milli = r.gpu.compute.units();
      shape.share = true;
    } else if (r.gpu.mode == DeliveryMode::kExclusive && r.gpu.count > 0) {
      shape.milli = kWholeGpu.units();
    } else {
      continue;  // MIG classes do not use shared or exclusive compute.
    }
    shape.models = r.allowed_models;
    if (shape.milli <= 0 || shape.count <= 0) {  // asks for no compute: uses no free GPU
      classes_.push_back({r.resources.cpu.units(), 0, 0, -1, w.weight});
      continue;
    }
    classes_.push_back({r.resources.cpu.units(), shape.milli, shape.count,
                        ShapeIndex(std::move(shape)), w.weight});
  }
  // CPU-only classes count every free GPU as unusable.
  for (const WorkloadClass& w : workload) {
    if (w.request.gpu.count == 0)
      classes_.push_back({w.request.resources.cpu.units(), 0, 0, -1, w.weight});
  }
  if (measure_ == Measure::kCapacity) MergeClasses();
}

int32_t FragmentationModel::ShapeIndex(Shape shape) {
  auto same = std::find(shapes_.begin(), shapes_.end(), shape);
  if (same != shapes_.end()) return static_cast<int32_t>(same - shapes_.begin());
  for (GpuModelId m : shape.models) {
    if (shape.allowed.size() <= static_cast<size_t>(m.value())) shape.allowed.resize(m.value() + 1);
    shape.allowed[m.value()] = true;
  }
  shapes_.push_back(std::move(shape));
  return static_cast<int32_t>(shapes_.size() - 1);
}

void FragmentationModel::MergeClasses() {
  std::vector<Class> merged;
  for (Class& c : classes_) {
    auto same = std::find_if(merged.begin(), merged.end(),
                             [&](const Class& m) { return m.cpu == c.cpu && m.shape == c.shape; });
    if (same == merged.end()) {
      merged.push_back(std::move(c));
    } else {
      same->weight += c.weight;
    }
  }
  classes_ = std::move(merged);
}

FragmentationModel::DeviceFit FragmentationModel::FitDevices(absl::Span<const FreeGpu> gpus) const {
  DeviceFit fit;
  Groups groups;
  for (const FreeGpu& g : gpus) {
    fit.idle += g.milli;
    auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return x.model == g.model && x.milli == g.milli && x.shares == g.shares;
    });
    if (same == groups.end()) {
      groups.push_back({g.model, g.milli, g.shares, 1});
    } else {
      ++same->n;
    }
  }
  if (fit.idle == 0) return fit;
  for (const Shape& s : shapes_) {
    ShapeFit& f = fit.shapes.emplace_back();
    for (const Group& g : groups) {
      bool allowed = (g.shares || !s.share) && s.Allows(g.model);
      if (allowed && g.milli >= s.milli) {
        f.fitting += g.n;
        f.replicas += static_cast<int32_t>((s.count == 1 ? g.milli / s.milli : 1) * g.n);
      } else {
        f.small += static_cast<int32_t>(g.milli * g.n);
      }
    }
    f.replicas /= s.count;  // replicas of several devices each take whole ones
  }
  return fit;
}

double FragmentationModel::Fragmentation(int64_t cpu_left, const DeviceFit& fit) const {
  if (fit.idle == 0) return 0;
  const double idle = static_cast<double>(fit.idle);
  const bool capacity = measure_ == Measure::kCapacity;
  double frag = 0;
  for (const Class& c : classes_) {
    // A class that does not fit cannot use any free compute; one that fits cannot use the
    // devices too small for it (kFgd) or what its replicas would leave (kCapacity).
    double unusable = idle;
    const ShapeFit* shape = c.shape < 0 || cpu_left < c.cpu ? nullptr : &fit.shapes[c.shape];
    if (shape && shape->fitting >= c.count) {
      int64_t replicas = shape->replicas;
      if (c.cpu > 0 && cpu_left < c.cpu * replicas) replicas = WholeTimes(cpu_left, c.cpu);
      unusable = capacity ? static_cast<double>(fit.idle - replicas * c.count * c.milli)
                          : static_cast<double>(shape->small);
    }
    frag += c.weight * unusable;
  }
  return frag;
}

double FragmentationModel::NodeFragmentation(int64_t cpu_left,
                                             absl::Span<const FreeGpu> gpus) const {
  return Fragmentation(cpu_left, FitDevices(gpus));
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
