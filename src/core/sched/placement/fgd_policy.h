#ifndef CARVE_CORE_SCHED_PLACEMENT_FGD_POLICY_H_
#define CARVE_CORE_SCHED_PLACEMENT_FGD_POLICY_H_

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "core/sched/placement/fragmentation.h"

namespace carve {

// Memo of NodeFragmentation: the devices' fit (FragmentationModel::FitDevices) by the multiset
// of (model, shares, free milli), so that nodes whose devices are in the same state share one
// computation, with the last 16 answers for the CPU left on such a node. Bounded (2^16 device
// states of about 460 bytes: 30 MB at most); cleared when full. One memo per model.
class FragMemo {
 public:
  double Get(const FragmentationModel& model, int64_t cpu_left, absl::Span<const FreeGpu> gpus);
  // The same for node `node` of the cluster as it is now: the last device state per node is
  // kept with its fit, so re-scoring one node for many requests looks its state up once.
  double Current(const FragmentationModel& model, NodeId node, int64_t cpu_left,
                 absl::Span<const FreeGpu> gpus);
  // The same for node `node` with its devices as the last Current(node) call saw them and
  // `cpu_left` free CPU. REQUIRES: that call had at most kMaxDevices devices.
  double CurrentDevices(const FragmentationModel& model, NodeId node, int64_t cpu_left) {
    return last_[node.value()].entry.Value(model, cpu_left);
  }
  static constexpr size_t kMaxDevices = 16;

 private:
  static constexpr size_t kMaxEntries = 1 << 16;
  struct Key {
    uint8_t n = 0;
    std::array<uint32_t, kMaxDevices> gpus{};
    bool operator==(const Key& o) const;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(H::combine_contiguous(std::move(h), k.gpus.data(), k.n), k.n);
    }
  };
  // One device state: its fit, and the last answers by CPU left (replaced in turn).
  struct Entry {
    FragmentationModel::DeviceFit fit;
    std::array<int64_t, 16> cpu = Unset();
    std::array<double, 16> value{};
    uint8_t next = 0;
    static std::array<int64_t, 16> Unset() {  // no CPU amount asked (not even a negative one)
      std::array<int64_t, 16> a;
      a.fill(std::numeric_limits<int64_t>::min());
      return a;
    }
    double Value(const FragmentationModel& model, int64_t cpu_left);
  };
  Entry& Find(const FragmentationModel& model, absl::Span<const FreeGpu> gpus);
  absl::flat_hash_map<Key, Entry> memo_;
  struct Last {
    absl::InlinedVector<uint32_t, kMaxDevices> gpus;  // by device index, as Key encodes them
    Entry entry;
  };
  std::vector<Last> last_;  // by node id
};

// Change of a node's fragmentation when a replica takes one of its device options. Lives within
// one policy evaluation (it reads the memo's answer for its node).
class FragDelta {
 public:
  FragDelta(const FragmentationModel& model, FragMemo& memo, NodeId id, const Node& node,
            const ReplicaRequest& replica);
  double After(const std::vector<DeviceGrant>& grants);
  double before() const { return before_; }

 private:
  const FragmentationModel& model_;
  FragMemo& memo_;
  FragmentationModel::FreeGpuList gpus_;
  FragmentationModel::FreeGpuList scratch_;
  NodeId id_;
  int64_t cpu_after_ = 0;
  double before_ = 0;
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_FGD_POLICY_H_
