#include "core/sched/placement/fgd_policy.h"
#include "core/sched/placement/policies.h"

namespace carve {
namespace {

// Carve's default. Like fgd it places each replica where the expected fragmentation of the
// workload grows least, but it compares the exact change instead of a truncated sigmoid.
class CarvePolicy final : public PlacementPolicy {
 public:
  explicit CarvePolicy(const Workload& workload) : model_(workload) {}
  absl::string_view name() const override { return "carve"; }

  Evaluation Evaluate(const Cluster& c, NodeId id, const ReplicaRequest& r,
                      const DeviceOptionList& options, std::mt19937_64&) const override {
    FragDelta delta(model_, memo_, c.node(id), r);
    Evaluation best{0, 0};
    for (size_t o = 0; o < options.size(); ++o) {
      double score = -delta.After(options[o]);
      if (o == 0 || score > best.score) best = {score, o};
    }
    return best;
  }

 private:
  FragmentationModel model_;
  mutable FragMemo memo_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeCarvePolicy(const Workload& workload) {
  return std::make_unique<CarvePolicy>(workload);
}

}  // namespace carve
