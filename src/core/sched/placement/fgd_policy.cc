#include <array>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "core/sched/placement/fgd_policy.h"
#include "core/sched/placement/policies.h"

namespace carve {

bool FragMemo::Key::operator==(const Key& o) const {
  return cpu == o.cpu && n == o.n && gpus == o.gpus;
}

double FragMemo::Get(const FragmentationModel& model, int64_t cpu_left,
                     absl::Span<const FreeGpu> gpus) {
  if (gpus.size() > kMaxDevices) return model.NodeFragmentation(cpu_left, gpus);
  Key key;
  key.cpu = cpu_left;
  key.n = static_cast<uint8_t>(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) {
    key.gpus[i] =
        static_cast<uint32_t>(gpus[i].model.value() << 12 | gpus[i].shares << 11 | gpus[i].milli);
  }
  std::sort(key.gpus.begin(), key.gpus.begin() + key.n);
  auto [it, inserted] = memo_.try_emplace(key, 0.0);
  if (inserted) {
    if (memo_.size() > kMaxEntries) {
      memo_.clear();
      return model.NodeFragmentation(cpu_left, gpus);
    }
    it->second = model.NodeFragmentation(cpu_left, gpus);
  }
  return it->second;
}

FragDelta::FragDelta(const FragmentationModel& model, FragMemo& memo, const Node& node,
                     const ReplicaRequest& r)
    : model_(model), memo_(memo) {
  gpus_ = FragmentationModel::FreeGpus(node);
  cpu_after_ = node.free.cpu.units() - r.resources.cpu.units();
  before_ = memo_.Get(model_, node.free.cpu.units(), gpus_);
}

double FragDelta::After(const std::vector<DeviceGrant>& grants) {
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
    FragDelta delta(model_, memo_, c.node(id), r);
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
