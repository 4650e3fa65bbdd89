#ifndef CARVE_CORE_SCHED_PLACEMENT_FIT_H_
#define CARVE_CORE_SCHED_PLACEMENT_FIT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "core/base/ids.h"
#include "core/model/cluster.h"
#include "core/sched/request.h"

namespace carve {

// Why a node cannot take a replica: the first filter it fails, in this order.
enum class FitReason : uint8_t {
  kFits,
  kNodeNotReady,
  kPool,
  kNodeSelector,
  kTaint,
  kCpu,
  kMemory,
  kStorage,
  kNetwork,
  kExtra,               // too little of a named extra resource (ExtraShort names it)
  kSpread,              // the node already runs max_per_node replicas of the request's app
  kGpuModel,            // no device of an allowed model
  kGpuMode,             // no device in the requested delivery mode
  kGpuUnhealthy,        // devices exist but none is healthy and available
  kGpuCount,            // not enough idle whole devices
  kGpuShare,            // no device with enough free compute share
  kGpuMemory,           // no device with enough free device memory
  kMigProfile,          // no free instance or free placement of the profile
  kGpuShareGroup,       // the shared devices that would fit serve another group's (tenant's) shares
  kGpuCapsNotEnforced,  // the shared devices that would fit cannot enforce the share's caps
  kCount,
};
inline constexpr int kFitReasonCount = static_cast<int>(FitReason::kCount);
absl::string_view ToString(FitReason reason);

// What a replica gets on one device.
struct DeviceGrant {
  int device = 0;
  GpuMilli compute;
  MemMib memory;
  int mig_profile = -1;
  int mig_start = -1;
  bool mig_created = false;      // a transient instance made for this replica
  std::string share_group = {};  // shares: the group (tenant) the share belongs to
  friend bool operator==(const DeviceGrant&, const DeviceGrant&) = default;
};

struct ReplicaPlacement {
  NodeId node;
  Resources resources;
  std::vector<DeviceGrant> grants;
  std::string app = {};  // counted in the node's Node::apps while placed
  friend bool operator==(const ReplicaPlacement&, const ReplicaPlacement&) = default;
};

// First filter `node` fails for `replica`, or kFits.
FitReason CheckNode(const Cluster& cluster, const Node& node, const ReplicaRequest& replica);

// Whether `node` fails `replica` for a reason no placement or release can change (`reason` is
// what CheckNode returned): its state, pool, labels or taints, its devices' models, modes,
// health or taints, or a request larger than the node's capacity. The placement index skips
// such a node until something other than an allocation changes it.
bool RuledOut(const Node& node, const ReplicaRequest& replica, FitReason reason);

// The distinct ways to give `replica` its GPUs on `node` (empty for a CPU-only replica: one
// option with no grants). Options that cannot differ for any policy are collapsed.
// REQUIRES: CheckNode(...) == kFits.
std::vector<std::vector<DeviceGrant>> DeviceOptions(const Cluster& cluster, const Node& node,
                                                    const ReplicaRequest& replica);

// Takes / gives back exactly what `placement` describes. Release(Apply(s)) == s.
void ApplyReplica(Cluster& cluster, const ReplicaPlacement& placement);
void ReleaseReplica(Cluster& cluster, const ReplicaPlacement& placement);

// The kind of GPU work a placement holds, for policies that group like with like: 0 for a share,
// k for k whole devices, -1 for MIG instances; nullopt for a CPU-only replica.
std::optional<int> GpuKind(const std::vector<DeviceGrant>& grants);

// The device memory a share gets on `d`: its request, or (no request) the device's memory in
// proportion to its compute share, so that no share is ever uncapped.
MemMib ShareMemory(const Cluster& cluster, const Device& d, const ReplicaRequest& replica);

// Whether a shared device may take a share of `replica`'s group: it holds no share or only the
// same group's.
bool ShareGroupAllows(const Device& d, const ReplicaRequest& replica);

// Whether `replica` tolerates every taint of device `d` (a device held by a reservation).
bool DeviceToleratedSlow(const Device& d, const ReplicaRequest& replica);
inline bool DeviceTolerated(const Device& d, const ReplicaRequest& replica) {
  return d.taints.empty() || DeviceToleratedSlow(d, replica);
}

// Whether device `d` may serve the request's model constraint.
bool ModelAllowed(const ReplicaRequest& replica, GpuModelId model);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_PLACEMENT_FIT_H_
