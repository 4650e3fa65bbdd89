#include <algorithm>

#include "core/sched/placement/fgd_policy.h"
#include "core/sched/placement/policies.h"

namespace carve {
namespace {

// Carve's default. Places each replica where the expected waste grows least, counting two kinds
// of waste against the expected workload:
//  - fragmentation, as in FGD: free GPU compute that the workload's request classes could not
//    use on this node (compared exactly, not through FGD's truncated sigmoid);
//  - stranding: free GPU compute the node can no longer feed with CPU, at the workload's
//    average CPU per unit of GPU. FGD only sees this once a class no longer fits; counting it
//    early keeps CPU-heavy and CPU-only work off GPU-dense nodes whose CPU their GPUs need.
// Ties go to the placer's node order, which packs work onto fewer nodes.
class CarvePolicy final : public PlacementPolicy {
 public:
  explicit CarvePolicy(const Workload& workload) : model_(workload) {
    double cpu = 0, milli = 0;
    for (const WorkloadClass& w : workload) {
      const GpuRequest& g = w.request.gpu;
      if (g.none() || g.mode == DeliveryMode::kPartition) continue;
      int64_t asked = g.mode == DeliveryMode::kShared ? g.compute.units() : 1000 * g.count;
      cpu += w.weight * static_cast<double>(w.request.resources.cpu.units());
      milli += w.weight * static_cast<double>(asked);
    }
    cpu_per_milli_ = milli > 0 ? cpu / milli : 0;
  }
  absl::string_view name() const override { return "carve"; }

  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    const Node& n = c.node(id);
    FragDelta frag(model_, memo_, n, r);
    double cpu_before = static_cast<double>(n.free.cpu.units());
    double cpu_after = cpu_before - static_cast<double>(r.resources.cpu.units());
    double gpu_before = static_cast<double>(FreeGpuMilli(n));
    double stranded_before = Stranded(cpu_before, gpu_before);
    Evaluation best{0, 0};
    for (size_t o = 0; o < options.size(); ++o) {
      double gpu_after = gpu_before;
      for (const DeviceGrant& g : options[o]) gpu_after -= static_cast<double>(g.compute.units());
      double waste = frag.After(options[o]) + Stranded(cpu_after, gpu_after) - stranded_before;
      if (o == 0 || -waste > best.score) best = {-waste, o};
    }
    return best;
  }

 private:
  // Free GPU milli beyond what `cpu_left` can feed at the workload's CPU per GPU milli.
  double Stranded(double cpu_left, double gpu_left) const {
    if (cpu_per_milli_ <= 0) return 0;
    return std::max(0.0, gpu_left - cpu_left / cpu_per_milli_);
  }

  FragmentationModel model_;
  mutable FragMemo memo_;
  double cpu_per_milli_ = 0;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeCarvePolicy(const Workload& workload) {
  return std::make_unique<CarvePolicy>(workload);
}

}  // namespace carve
