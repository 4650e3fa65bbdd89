#ifndef CARVE_CORE_SCHED_REQUEST_H_
#define CARVE_CORE_SCHED_REQUEST_H_

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "core/base/ids.h"
#include "core/base/quantity.h"
#include "core/model/cluster.h"

namespace carve {

// What one replica asks of its GPUs.
//   exclusive: `count` whole devices (count 0 means a CPU-only replica);
//   shared:    one device, a `compute` share below one GPU and an optional `memory` cap;
//   partition: `count` MIG instances of `profile` (resolved per device model).
struct GpuRequest {
  DeliveryMode mode = DeliveryMode::kExclusive;
  int count = 0;
  GpuMilli compute;
  MemMib memory;
  std::string profile;

  bool none() const { return count == 0; }
  // Compute asked of exclusive and shared devices, in milli-GPU (0 for CPU-only and MIG).
  int64_t compute_milli() const {
    if (mode == DeliveryMode::kShared) return compute.units();
    if (mode == DeliveryMode::kExclusive) return count * kWholeGpu.units();
    return 0;
  }
  friend bool operator==(const GpuRequest&, const GpuRequest&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const GpuRequest& g) {
    return H::combine(std::move(h), g.mode, g.count, g.compute.units(), g.memory.units(),
                      g.profile);
  }
};

struct ReplicaRequest {
  GpuRequest gpu;
  Resources resources;                               // CPU, memory, storage, network per replica
  std::vector<GpuModelId> allowed_models;            // empty: any model
  std::string pool;                                  // empty: any pool
  std::map<std::string, std::string> node_selector;  // ordered: part of the hash
  std::vector<Taint> tolerations;
  // Shared mode: shares of different groups never share a device (one MPS server serves one
  // Unix user at a time; the runtime sets the tenant). Empty: no constraint.
  std::string share_group = {};
  // Shared mode: accepts a device whose caps are not enforced (isolation: best-effort).
  bool best_effort = false;
  // Shared mode without a memory request: the share still gets a memory cap, the device's memory
  // in proportion to its compute share (the platform sets this; trace replays leave shares
  // without memory uncapped, as in the traces).
  bool cap_memory = false;
  // Anti-affinity by application: at most `max_per_node` replicas of `app` (this request's and
  // every other request's of the same app) on one node; 0 means no limit. Replicas with an app
  // are counted per node (Node::apps) whether or not they set a limit.
  std::string app = {};
  int max_per_node = 0;

  friend bool operator==(const ReplicaRequest&, const ReplicaRequest&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ReplicaRequest& r) {
    h = H::combine(std::move(h), r.gpu, r.resources.cpu.units(), r.resources.memory.units(),
                   r.resources.storage.units(), r.resources.network.units(), r.pool, r.share_group,
                   r.best_effort, r.app, r.max_per_node);
    for (const ExtraResource& x : r.resources.extra) h = H::combine(std::move(h), x.name, x.amount);
    for (GpuModelId m : r.allowed_models) h = H::combine(std::move(h), m);
    for (const auto& [k, v] : r.node_selector) h = H::combine(std::move(h), k, v);
    for (const Taint& t : r.tolerations) h = H::combine(std::move(h), t.key, t.value);
    return h;
  }
};

// All replicas are placed or none (a gang).
struct JobRequest {
  int replicas = 1;
  ReplicaRequest replica;
};

// Checks a request for contradictions (negative amounts, a share of a whole GPU or more, a
// partition request without a profile the catalog knows); the error says which field is wrong.
absl::Status ValidateRequest(const JobRequest& job, const GpuCatalog& catalog);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_REQUEST_H_
