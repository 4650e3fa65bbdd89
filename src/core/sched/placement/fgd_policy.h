#ifndef CARVE_CORE_SCHED_PLACEMENT_FGD_POLICY_H_
#define CARVE_CORE_SCHED_PLACEMENT_FGD_POLICY_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/sched/placement/fragmentation.h"

namespace carve {

// Memo of NodeFragmentation by (free CPU, multiset of (model, free milli)): nodes in the same
// state share one computation. Bounded; cleared when full.
class FragMemo {
 public:
  double Get(const FragmentationModel& model, int64_t cpu_left, absl::Span<const FreeGpu> gpus);

 private:
  static constexpr size_t kMaxDevices = 16;
  static constexpr size_t kMaxEntries = 1 << 18;
  struct Key {
    int64_t cpu = 0;
    uint8_t n = 0;
    std::array<uint32_t, kMaxDevices> gpus{};
    bool operator==(const Key& o) const;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(H::combine_contiguous(std::move(h), k.gpus.data(), k.n), k.cpu, k.n);
    }
  };
  absl::flat_hash_map<Key, double> memo_;
};

// Change of a node's fragmentation when a replica takes one of its device options.
class FragDelta {
 public:
  FragDelta(const FragmentationModel& model, FragMemo& memo, const Node& node,
            const ReplicaRequest& replica);
  double After(const std::vector<DeviceGrant>& grants);
  double before() const { return before_; }

 private:
  const FragmentationModel& model_;
  FragMemo& memo_;
  FragmentationModel::FreeGpuList gpus_;
  FragmentationModel::FreeGpuList scratch_;
  int64_t cpu_after_ = 0;
  double before_ = 0;
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_FGD_POLICY_H_
