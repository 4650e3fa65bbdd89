#include <algorithm>
#include <array>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "core/sched/placement/fgd_policy.h"
#include "core/sched/placement/policies.h"

namespace carve {

namespace {

// One device's free state in 32 bits: model, whether it serves shares, free milli (<= 1000).
uint32_t Code(const FreeGpu& g) {
  return static_cast<uint32_t>(g.model.value() << 12 | g.shares << 11 | g.milli);
}

}  // namespace

bool FragMemo::Key::operator==(const Key& o) const { return n == o.n && gpus == o.gpus; }

double FragMemo::Get(const FragmentationModel& model, int64_t cpu_left,
                     absl::Span<const FreeGpu> gpus) {
  if (gpus.size() > kMaxDevices) return model.NodeFragmentation(cpu_left, gpus);
  return Find(model, gpus).Value(model, cpu_left);
}

double FragMemo::Entry::Value(const FragmentationModel& model, int64_t cpu_left) {
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (cpu[i] == cpu_left) return value[i];
  }
  cpu[next] = cpu_left;
  value[next] = model.Fragmentation(cpu_left, fit);
  double answer = value[next];
  next = static_cast<uint8_t>((next + 1) % cpu.size());
  return answer;
}

FragMemo::Entry& FragMemo::Find(const FragmentationModel& model, absl::Span<const FreeGpu> gpus) {
  Key key;
  key.n = static_cast<uint8_t>(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) key.gpus[i] = Code(gpus[i]);
  std::sort(key.gpus.begin(), key.gpus.begin() + key.n);
  auto it = memo_.find(key);
  if (it == memo_.end()) {
    if (memo_.size() >= kMaxEntries) memo_.clear();
    it = memo_.emplace(key, Entry{model.FitDevices(gpus)}).first;
  }
  return it->second;
}

double FragMemo::Current(const FragmentationModel& model, NodeId node, int64_t cpu_left,
                         absl::Span<const FreeGpu> gpus) {
  if (gpus.size() > kMaxDevices) return Get(model, cpu_left, gpus);
  size_t at = static_cast<size_t>(node.value());
  if (last_.size() <= at) last_.resize(at + 1);
  Last& last = last_[at];
  bool same = last.gpus.size() == gpus.size();
  for (size_t i = 0; same && i < gpus.size(); ++i) same = last.gpus[i] == Code(gpus[i]);
  if (!same) {
    last.gpus.clear();
    for (const FreeGpu& g : gpus) last.gpus.push_back(Code(g));
    last.entry = Find(model, gpus);
  }
  return last.entry.Value(model, cpu_left);
}

FragDelta::FragDelta(const FragmentationModel& model, FragMemo& memo, NodeId id, const Node& node,
                     const ReplicaRequest& r)
    : model_(model), memo_(memo), id_(id) {
  gpus_ = FragmentationModel::FreeGpus(node);
  cpu_after_ = node.free.cpu.units() - r.resources.cpu.units();
  before_ = memo_.Current(model_, id, node.free.cpu.units(), gpus_);
}

double FragDelta::After(const std::vector<DeviceGrant>& grants) {
  // CPU-only and MIG replicas leave the devices' free compute as it is.
  bool devices_unchanged = std::all_of(grants.begin(), grants.end(),
                                       [](const DeviceGrant& g) { return g.mig_profile >= 0; });
  if (devices_unchanged && gpus_.size() <= FragMemo::kMaxDevices) {
    return memo_.CurrentDevices(model_, id_, cpu_after_) - before_;
  }
  scratch_ = gpus_;
  FragmentationModel::Take(scratch_, grants);
  return memo_.Get(model_, cpu_after_, scratch_) - before_;
}

namespace {

class Fgd final : public PlacementPolicy {
 public:
  // The paper's typical pods: the classes that cover 95% of the workload.
  explicit Fgd(const Workload& workload) : model_(TypicalClasses(workload, 0.95)) {}
  absl::string_view name() const override { return "fgd"; }

  // score = trunc(100 * sigmoid(-delta / 1000)); the best device is the argmax of the truncated
  // score, lowest index first, exactly as the paper's simulator ranks them.
  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    FragDelta delta(model_, memo_, id, c.node(id), r);
    Evaluation best{-1, 0};
    size_t considered = r.gpu.mode == DeliveryMode::kShared ? options.size() : 1;
    for (size_t o = 0; o < considered; ++o) {
      double x = -delta.After(options[o]) / 1000.0;
      double score = static_cast<double>(static_cast<int64_t>(100.0 / (1.0 + std::exp(-x))));
      if (score > best.score) best = {score, o};
    }
    return best;
  }

 private:
  FragmentationModel model_;
  mutable FragMemo memo_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const Workload& workload) {
  return std::make_unique<Fgd>(workload);
}

}  // namespace carve
