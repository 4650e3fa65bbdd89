#include <algorithm>

#include "core/sched/placement/fgd_policy.h"
#include "core/sched/placement/policies.h"

namespace carve {
namespace {

// Carve's default. Places each replica where the expected waste grows least, measuring waste
// against the whole observed workload (every request class, by frequency):
//  - fragmentation (FragmentationModel::kCapacity): free GPU compute beyond what as many
//    replicas of each class as the node can still host, by devices and by CPU, would use;
//  - stranding: free GPU compute the node can no longer feed with CPU at the workload's
//    average CPU per GPU, so CPU-heavy and CPU-only work stays off GPU-dense nodes;
//  - scarcity: compute taken from a kind of device (model, and whether it serves shares) that
//    the workload needs more than the average device (demand over supply, per kind) costs its
//    excess pressure, so work that can run anywhere leaves scarce devices to work that cannot.
// The change is compared exactly; ties go to the placer's node order.
class CarvePolicy final : public PlacementPolicy {
 public:
  explicit CarvePolicy(const Workload& workload)
      : workload_(workload), model_(workload, FragmentationModel::Measure::kCapacity) {
    double cpu = 0, milli = 0;
    for (const WorkloadClass& w : workload) {
      double asked = static_cast<double>(w.request.gpu.compute_milli());
      if (asked == 0) continue;
      cpu += w.weight * static_cast<double>(w.request.resources.cpu.units());
      milli += w.weight * asked;
    }
    cpu_per_milli_ = milli > 0 ? cpu / milli : 0;
  }
  absl::string_view name() const override { return "carve"; }

  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    const Node& n = c.node(id);
    const std::vector<double>& pressure = Pressure(c);
    FragDelta frag(model_, memo_, id, n, r);
    double cpu_before = static_cast<double>(n.free.cpu.units());
    double cpu_after = cpu_before - static_cast<double>(r.resources.cpu.units());
    double gpu_before = static_cast<double>(FreeGpuMilli(n));
    double stranded_before = Stranded(cpu_before, gpu_before);
    Evaluation best{0, 0};
    // MIG instances take no shared or whole compute: every option scores the same as the first.
    size_t considered = GpuKind(options[0]) == -1 ? 1 : options.size();
    for (size_t o = 0; o < considered; ++o) {
      double gpu_after = gpu_before;
      double scarcity = 0;
      for (const DeviceGrant& g : options[o]) {
        double taken = static_cast<double>(g.compute.units());
        gpu_after -= taken;
        scarcity += taken * (pressure[KindOf(n.devices[g.device])] - 1);
      }
      double waste =
          frag.After(options[o]) + Stranded(cpu_after, gpu_after) - stranded_before + scarcity;
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

  // Devices are told apart by model and by whether they serve shares (shared mode).
  static size_t KindOf(const Device& d) {
    return static_cast<size_t>(d.model.value()) * 2 + (d.mode == DeliveryMode::kShared);
  }
  static bool Serves(const ReplicaRequest& r, size_t kind) {
    bool shares = kind % 2 == 1;
    return ModelAllowed(r, GpuModelId(static_cast<int64_t>(kind / 2))) &&
           (shares || r.gpu.mode != DeliveryMode::kShared);
  }

  // Per device kind: the workload's demand on it (each class's GPU demand spread over the
  // capacity of the kinds that serve it) relative to the capacity-weighted mean; 1 where no
  // class needs it. Depends only on the cluster's devices, so it is kept until they change.
  const std::vector<double>& Pressure(const Cluster& c) const {
    if (pressure_for_ == std::pair{c.size(), c.total_gpus()}) return pressure_;
    pressure_for_ = {c.size(), c.total_gpus()};
    size_t kinds = c.catalog().size() * 2;
    std::vector<double> capacity(kinds, 0);
    for (const Node& n : c.nodes()) {
      for (const Device& d : n.devices) {
        if (d.mode != DeliveryMode::kPartition) capacity[KindOf(d)] += 1000;
      }
    }
    std::vector<double> demand(kinds, 0);
    for (const WorkloadClass& w : workload_) {
      double asked = w.weight * static_cast<double>(w.request.gpu.compute_milli());
      double supply = 0;
      for (size_t k = 0; k < kinds; ++k) supply += Serves(w.request, k) ? capacity[k] : 0;
      if (asked == 0 || supply == 0) continue;
      for (size_t k = 0; k < kinds; ++k) demand[k] += Serves(w.request, k) ? asked / supply : 0;
    }
    double weighted = 0, total = 0;
    for (size_t k = 0; k < kinds; ++k) {
      weighted += capacity[k] * demand[k];
      total += capacity[k];
    }
    double mean = total > 0 ? weighted / total : 0;
    pressure_.assign(kinds, 1.0);
    for (size_t k = 0; k < kinds; ++k) {
      if (mean > 0 && capacity[k] > 0) pressure_[k] = demand[k] / mean;
    }
    return pressure_;
  }

  Workload workload_;
  FragmentationModel model_;
  double cpu_per_milli_ = 0;
  mutable FragMemo memo_;
  mutable std::vector<double> pressure_;
  mutable std::pair<size_t, int64_t> pressure_for_{0, -1};
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeCarvePolicy(const Workload& workload) {
  return std::make_unique<CarvePolicy>(workload);
}

}  // namespace carve
