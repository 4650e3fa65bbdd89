#ifndef CARVE_CORE_MODEL_CLUSTER_H_
#define CARVE_CORE_MODEL_CLUSTER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/base/ids.h"
#include "core/base/quantity.h"
#include "core/model/gpu_catalog.h"

namespace carve {

enum class DeliveryMode : uint8_t { kExclusive, kShared, kPartition };
enum class DeviceHealth : uint8_t { kHealthy, kSuspect, kUnhealthy };
enum class DeviceState : uint8_t { kAvailable, kCordoned, kDraining, kReconfiguring, kQuarantined };
enum class NodeState : uint8_t { kReady, kNotReady, kCordoned, kDraining, kMaintenance };

absl::string_view ToString(DeliveryMode mode);
absl::StatusOr<DeliveryMode> ParseDeliveryMode(absl::string_view text);
absl::string_view ToString(NodeState state);

// One MIG instance on a partition-mode device. `profile` indexes the model's MIG profile table.
struct MigInstance {
  int profile = 0;
  int start = 0;  // First memory slice of the placement.
  bool allocated = false;
  // Created on demand for one job on a dynamic-layout device; destroyed again on release.
  bool transient = false;
};

struct Taint {
  std::string key;
  std::string value;
  friend bool operator==(const Taint&, const Taint&) = default;
};

struct Device {
  int index = 0;
  GpuModelId model;
  DeliveryMode mode = DeliveryMode::kExclusive;
  DeviceHealth health = DeviceHealth::kHealthy;
  DeviceState state = DeviceState::kAvailable;
  // Exclusive and shared devices: unallocated compute share and device memory.
  GpuMilli free_compute = kWholeGpu;
  MemMib free_memory;
  int holders = 0;  // Allocations currently on this device (shares or a whole grant).
  // Partition devices: the current layout; `dynamic_layout` lets the scheduler create instances
  // in free placements (and destroy them when released).
  bool dynamic_layout = false;
  std::vector<MigInstance> instances;
  // Shared devices: whether the node enforces each share's caps (an MPS daemon runs for it);
  // shares that do not accept unenforced caps (best-effort) are not placed where it does not.
  bool share_caps_enforced = true;
  // Shared devices: the share group (tenant) whose shares it holds now; empty while it holds no
  // share. One MPS server serves one Unix user at a time, so shares of different groups never
  // pack onto one device.
  std::string share_group = {};
  // NoSchedule semantics for this device alone (a reservation of GPUs by count): a replica uses
  // it only when it tolerates each one.
  std::vector<Taint> taints = {};

  bool schedulable() const {
    return health == DeviceHealth::kHealthy && state == DeviceState::kAvailable;
  }
  bool idle() const { return holders == 0; }
};

// Named resources beyond CPU, memory, storage and network (RDMA bandwidth, local NVMe, licences):
// whole units of each, sorted by name, each name once. A node without a name has none of it.
struct ExtraResource {
  std::string name;
  int64_t amount = 0;
  friend bool operator==(const ExtraResource&, const ExtraResource&) = default;
};
using ExtraResources = std::vector<ExtraResource>;

// The amount of `name` in `extra` (0 when it is not there).
int64_t ExtraAmount(const ExtraResources& extra, absl::string_view name);
// The first resource of `need` that `have` holds less of than asked; nullptr when none.
const ExtraResource* ExtraShort(const ExtraResources& have, const ExtraResources& need);

struct Resources {
  CpuMilli cpu;
  MemMib memory;
  MemMib storage;
  NetMbps network;
  ExtraResources extra = {};

  bool Covers(const Resources& need) const {
    return cpu >= need.cpu && memory >= need.memory && storage >= need.storage &&
           network >= need.network && (need.extra.empty() || !ExtraShort(extra, need.extra));
  }
  Resources& operator-=(const Resources& o);
  Resources& operator+=(const Resources& o);
  friend bool operator==(const Resources&, const Resources&) = default;
};

struct Node {
  std::string name;
  std::string pool = "default";
  absl::flat_hash_map<std::string, std::string> labels;
  std::vector<Taint> taints;  // NoSchedule semantics: a job must tolerate each one.
  NodeState state = NodeState::kReady;
  Resources capacity;
  Resources free;
  std::vector<Device> devices;
  // How many replicas of each GPU kind run here (see GpuKind in core/sched/placement/fit.h);
  // packing-by-kind policies read it. CPU-only replicas are not counted.
  absl::flat_hash_map<int, int> kinds;
  // How many replicas of each application run here (ReplicaRequest::app), for spread limits.
  absl::flat_hash_map<std::string, int> apps = {};
};

// The scheduler's view of every node and device, with the free amounts kept current by
// ApplyReplica/ReleaseReplica. Plain value type: copy it to get a snapshot.
class Cluster {
 public:
  explicit Cluster(const GpuCatalog* catalog) : catalog_(catalog) {}

  // Adds a node whose free resources equal its capacity; devices get their model's memory.
  NodeId AddNode(Node node);

  const GpuCatalog& catalog() const { return *catalog_; }
  size_t size() const { return nodes_.size(); }
  const Node& node(NodeId id) const { return nodes_[id.value()]; }
  Node& mutable_node(NodeId id) { return nodes_[id.value()]; }
  const std::vector<Node>& nodes() const { return nodes_; }

  int64_t total_gpus() const { return total_gpus_; }
  // The largest node, for policies that scale by it.
  CpuMilli max_node_cpu() const { return max_node_cpu_; }
  int max_node_gpus() const { return max_node_gpus_; }
  // Sum over exclusive and shared devices of allocated compute, plus allocated MIG slices as
  // fractions of their device: the numerator of GPU allocation.
  int64_t AllocatedGpuMilli() const;

  friend bool operator==(const Cluster& a, const Cluster& b);

 private:
  const GpuCatalog* catalog_;
  std::vector<Node> nodes_;
  int64_t total_gpus_ = 0;
  CpuMilli max_node_cpu_;
  int max_node_gpus_ = 0;
};

bool operator==(const Device& a, const Device& b);
bool operator==(const MigInstance& a, const MigInstance& b);
bool operator==(const Node& a, const Node& b);

}  // namespace carve

#endif  // CARVE_CORE_MODEL_CLUSTER_H_
