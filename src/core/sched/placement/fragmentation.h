#ifndef CARVE_CORE_SCHED_PLACEMENT_FRAGMENTATION_H_
#define CARVE_CORE_SCHED_PLACEMENT_FRAGMENTATION_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/base/ids.h"
#include "core/model/cluster.h"
#include "core/sched/placement/policy.h"

namespace carve {

// Free compute of one device as the fragmentation measure sees it.
struct FreeGpu {
  GpuModelId model;
  int64_t milli = 0;
};

// GPU fragmentation of a node against an expected workload, after "Beware of Fragmentation"
// (Weng et al., USENIX ATC'23): for each workload class, the free GPU compute that class could
// not use on this node, weighted by the class's share of the workload. A class that fits
// (enough devices of an allowed model with enough free compute, and enough free CPU) cannot use
// devices with less free compute than it asks; a class that does not fit cannot use any.
class FragmentationModel {
 public:
  explicit FragmentationModel(const Workload& workload);

  // Expected unusable free GPU milli on a node with `cpu_left` free CPU and `gpus` free.
  double NodeFragmentation(int64_t cpu_left, absl::Span<const FreeGpu> gpus) const;

  // The same for a node of the cluster as it is now (exclusive and shared devices).
  double NodeFragmentation(const Cluster& cluster, const Node& node) const;

  // Free compute of every device of `node`, by device index; and the same after `grants`.
  static std::vector<FreeGpu> FreeGpus(const Node& node);
  static void Take(std::vector<FreeGpu>& gpus, const std::vector<DeviceGrant>& grants);

  bool empty() const { return classes_.empty(); }

 private:
  struct Class {
    int64_t cpu = 0;
    int64_t milli = 0;  // per device; 0 for CPU-only classes
    int count = 0;
    std::vector<GpuModelId> models;  // empty: any
    double weight = 0;
  };
  std::vector<Class> classes_;
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_FRAGMENTATION_H_
