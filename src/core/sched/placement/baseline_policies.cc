#include <algorithm>
#include <cstdint>
#include <numeric>

#include "core/sched/placement/policies.h"

namespace carve {
namespace {

// The normalizers the paper's simulator uses: the largest node's CPU and GPU capacity.
struct Scale {
  double cpu;
  double gpu;
  explicit Scale(const Cluster& c)
      : cpu(std::max<double>(1, static_cast<double>(c.max_node_cpu().units()))),
        gpu(std::max<double>(1, c.max_node_gpus() * 1000.0)) {}
};

class FirstFit final : public PlacementPolicy {
 public:
  absl::string_view name() const override { return "first-fit"; }
  Evaluation Evaluate(const Cluster&, NodeId id, const ReplicaRequest&,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    (void)options;
    return {-static_cast<double>(id.value()), 0};
  }
};

class BestFit final : public PlacementPolicy {
 public:
  absl::string_view name() const override { return "best-fit"; }
  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    const Node& n = c.node(id);
    Scale scale(c);
    double cpu_after = static_cast<double>(n.free.cpu.units() - r.resources.cpu.units());
    double gpu_after = static_cast<double>(FreeGpuMilli(n) - r.gpu.compute_milli());
    double raw = (1 - (0.5 * cpu_after / scale.cpu + 0.5 * gpu_after / scale.gpu)) * 100;
    return {static_cast<double>(static_cast<int64_t>(raw)), BestFitOption(n, options)};
  }
  // Min-max to 0..100 in integers, as kube-scheduler score plugins normalize.
  void Normalize(std::vector<double>& scores) const override {
    auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
    int64_t low = static_cast<int64_t>(*lo);
    int64_t range = static_cast<int64_t>(*hi) - low;
    for (double& s : scores) {
      s = range == 0 ? 0 : static_cast<double>((static_cast<int64_t>(s) - low) * 100 / range);
    }
  }
};

class Packing final : public PlacementPolicy {
 public:
  absl::string_view name() const override { return "packing"; }
  Evaluation Evaluate(const Cluster&, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override;
};

Evaluation Packing::Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                             const DeviceOptionList& options, std::mt19937_64&) const {
  const Node& n = c.node(id);
  size_t option = BestFitOption(n, options);
  if (r.gpu.none() || r.gpu.mode == DeliveryMode::kPartition) return {0, option};
  int64_t devices = 0, idle = 0;
  for (const Device& d : n.devices) {
    if (d.mode == DeliveryMode::kPartition) continue;
    ++devices;
    idle += d.free_compute == kWholeGpu;
  }
  if (idle == devices) return {static_cast<double>(std::max(33 - idle, idle)), option};
  int64_t idle_used = 0;
  int64_t left_pct = 0;
  for (const DeviceGrant& g : options[option]) {
    int64_t left = n.devices[g.device].free_compute.units();
    idle_used += left == kWholeGpu.units();
    left_pct += left * 100 / 1000;
  }
  if (idle_used > 0) return {static_cast<double>(std::max<int64_t>(50 - idle_used, 33)), option};
  return {static_cast<double>(std::max<int64_t>(100 - left_pct / 10, 50)), option};
}

class Clustering final : public PlacementPolicy {
 public:
  absl::string_view name() const override { return "clustering"; }
  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    const Node& n = c.node(id);
    size_t option = BestFitOption(n, options);
    std::optional<int> kind = GpuKind(options[option]);
    if (!kind) return {0, option};
    int64_t scale = static_cast<int64_t>(Scale(c).gpu);
    int64_t base = 25 * (scale - FreeGpuMilli(n)) / scale;
    int64_t bonus = 0;
    if (auto it = n.kinds.find(*kind); it != n.kinds.end() && it->second > 0) {
      bonus = n.kinds.size() == 1 ? 75 : 50;
    } else if (n.kinds.empty()) {
      bonus = 25;
    }
    (void)r;
    return {static_cast<double>(base + bonus), option};
  }
};

class DotProduct final : public PlacementPolicy {
 public:
  absl::string_view name() const override { return "dot-product"; }
  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    const Node& n = c.node(id);
    Scale scale(c);
    double dot = (static_cast<double>(n.free.cpu.units()) / scale.cpu) *
                     (static_cast<double>(r.resources.cpu.units()) / scale.cpu) +
                 (static_cast<double>(FreeGpuMilli(n)) / scale.gpu) *
                     (static_cast<double>(r.gpu.compute_milli()) / scale.gpu);
    return {static_cast<double>(static_cast<int64_t>(100 * (1 - dot / 2))),
            BestFitOption(n, options)};
  }
};

class Random final : public PlacementPolicy {
 public:
  absl::string_view name() const override { return "random"; }
  // A share goes to a device drawn uniformly from those that fit. Options stand for all devices
  // in the same state, so each is drawn with weight of the devices it stands for.
  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64& rng) const override {
    if (r.gpu.mode != DeliveryMode::kShared) {
      return {0, std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)};
    }
    const Node& n = c.node(id);
    std::vector<int> weights(options.size(), 0);
    for (const Device& d : n.devices) {
      for (size_t o = 0; o < options.size(); ++o) {
        const Device& rep = n.devices[options[o][0].device];
        if (rep.model == d.model && rep.free_compute == d.free_compute &&
            rep.free_memory == d.free_memory && rep.mode == d.mode && d.schedulable()) {
          ++weights[o];
          break;
        }
      }
    }
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    return {0, pick(rng)};
  }
  TieBreak tie_break() const override { return TieBreak::kRandom; }
};

}  // namespace

int64_t FreeGpuMilli(const Node& node) {
  int64_t free = 0;
  for (const Device& d : node.devices) {
    if (d.mode != DeliveryMode::kPartition) free += d.free_compute.units();
  }
  return free;
}

size_t BestFitOption(const Node& node, const DeviceOptionList& options) {
  size_t best = 0;
  for (size_t o = 1; o < options.size(); ++o) {
    const auto& a = options[o];
    const auto& b = options[best];
    if (a.size() != 1 || b.size() != 1 || a[0].mig_profile >= 0) break;
    if (node.devices[a[0].device].free_compute < node.devices[b[0].device].free_compute) best = o;
  }
  return best;
}

std::unique_ptr<PlacementPolicy> MakeFirstFitPolicy() { return std::make_unique<FirstFit>(); }
std::unique_ptr<PlacementPolicy> MakeBestFitPolicy() { return std::make_unique<BestFit>(); }
std::unique_ptr<PlacementPolicy> MakePackingPolicy() { return std::make_unique<Packing>(); }
std::unique_ptr<PlacementPolicy> MakeClusteringPolicy() { return std::make_unique<Clustering>(); }
std::unique_ptr<PlacementPolicy> MakeDotProductPolicy() { return std::make_unique<DotProduct>(); }
std::unique_ptr<PlacementPolicy> MakeRandomPolicy() { return std::make_unique<Random>(); }

}  // namespace carve
