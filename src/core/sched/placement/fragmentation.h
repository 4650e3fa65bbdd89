#ifndef CARVE_CORE_SCHED_PLACEMENT_FRAGMENTATION_H_
#define CARVE_CORE_SCHED_PLACEMENT_FRAGMENTATION_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "core/base/ids.h"
#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"

namespace carve {

// Free compute of one device as the fragmentation measure sees it.
struct FreeGpu {
  GpuModelId model;
  int64_t milli = 0;
  bool shares = false;  // a shared-mode device: serves shares as well as whole requests
};

// GPU fragmentation of a node against an expected workload, after "Beware of Fragmentation"
// (Weng et al., USENIX ATC'23): for each workload class, the free GPU compute that class could
// not use on this node, weighted by the class's share of the workload. A class that fits
// (enough devices of an allowed model with enough free compute, and enough free CPU) cannot use
// devices with less free compute than it asks; a class that does not fit cannot use any.
class FragmentationModel {
 public:
  // kFgd: the paper's measure. kCapacity: what a class cannot use is the free compute beyond
  // what as many of its replicas as the node can host (by devices and by CPU) would take.
  enum class Measure : uint8_t { kFgd, kCapacity };
  explicit FragmentationModel(const Workload& workload, Measure measure = Measure::kFgd);

  // Expected unusable free GPU milli on a node with `cpu_left` free CPU and `gpus` free.
  double NodeFragmentation(int64_t cpu_left, absl::Span<const FreeGpu> gpus) const;

  // The same in two steps, the first independent of CPU (so that it can be memoized by device
  // state alone): how each class's device shape fits the free devices, then the measure.
  struct ShapeFit {
    int32_t fitting = 0;   // devices with room for one more replica's share
    int32_t small = 0;     // free compute on devices without that room
    int32_t replicas = 0;  // replicas the devices could host (shares stack on one device)
  };
  struct DeviceFit {
    int64_t idle = 0;  // free compute on all devices
    absl::InlinedVector<ShapeFit, 16> shapes;
  };
  DeviceFit FitDevices(absl::Span<const FreeGpu> gpus) const;
  double Fragmentation(int64_t cpu_left, const DeviceFit& fit) const;

  // The same for a node of the cluster as it is now (exclusive and shared devices).
  double NodeFragmentation(const Node& node) const;

  // Free compute of every device of `node`, by device index; and the same after `grants`.
  using FreeGpuList = absl::InlinedVector<FreeGpu, 16>;
  static FreeGpuList FreeGpus(const Node& node);
  static void Take(FreeGpuList& gpus, const std::vector<DeviceGrant>& grants);

 private:
  // Devices in the same state, counted: a node's 8 idle GPUs are one group.
  struct Group {
    GpuModelId model;
    int64_t milli = 0;
    bool shares = false;
    int n = 0;
  };
  using Groups = absl::InlinedVector<Group, 16>;
  // What a class asks of devices; classes that differ only in CPU share one shape, whose
  // fit over a node's devices is counted once per node.
  struct Shape {
    int64_t milli = 0;  // per device
    int count = 0;
    bool share = false;              // needs a shared-mode device
    std::vector<GpuModelId> models;  // empty: any
    std::vector<bool> allowed;       // by model id, from `models`; empty: any
    bool Allows(GpuModelId m) const {
      return allowed.empty() ||
             (static_cast<size_t>(m.value()) < allowed.size() && allowed[m.value()]);
    }
    bool operator==(const Shape& o) const {
      return milli == o.milli && count == o.count && share == o.share && models == o.models;
    }
  };
  struct Class {
    int64_t cpu = 0;
    int64_t milli = 0;  // per device, from its shape; 0 for CPU-only classes
    int32_t count = 0;
    int32_t shape = -1;  // into shapes_; -1 for CPU-only classes
    double weight = 0;
  };
  int32_t ShapeIndex(Shape shape);
  // kCapacity: classes that differ only in what the measure ignores (memory) are one, their weights
  // summed (kFgd keeps the paper's classes one by one, so its figures stay as reproduced).
  void MergeClasses();

  std::vector<Class> classes_;
  std::vector<Shape> shapes_;
  Measure measure_;
};

// The most popular classes of `workload` that together cover `coverage` of its weight (the
// first class that reaches it included), reweighted to sum to 1: the FGD paper's "typical pods"
// at coverage 0.95. Stable: classes of equal weight keep their order.
Workload TypicalClasses(const Workload& workload, double coverage);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_FRAGMENTATION_H_
