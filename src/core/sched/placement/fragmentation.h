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
  struct Class {
    int64_t cpu = 0;
    int64_t milli = 0;  // per device; 0 for CPU-only classes
    int count = 0;
    bool share = false;              // needs a shared-mode device
    std::vector<GpuModelId> models;  // empty: any
    std::vector<bool> allowed;       // by model id, from `models`; empty: any
    bool Allows(GpuModelId m) const {
      return allowed.empty() ||
             (static_cast<size_t>(m.value()) < allowed.size() && allowed[m.value()]);
    }
    double weight = 0;
  };
  double Unusable(const Class& c, int64_t cpu_left, const Groups& groups, int64_t idle) const;
  // kCapacity: classes that differ only in what Unusable ignores (memory) are one, their weights
  // summed (kFgd keeps the paper's classes one by one, so its figures stay as reproduced).
  void MergeClasses();

  std::vector<Class> classes_;
  Measure measure_;
};

// The most popular classes of `workload` that together cover `coverage` of its weight (the
// first class that reaches it included), reweighted to sum to 1: the FGD paper's "typical pods"
// at coverage 0.95. Stable: classes of equal weight keep their order.
Workload TypicalClasses(const Workload& workload, double coverage);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_FRAGMENTATION_H_
