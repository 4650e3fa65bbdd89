#ifndef CARVE_RUNTIME_NODE_RECORDS_H_
#define CARVE_RUNTIME_NODE_RECORDS_H_

// The parts of a node's record (records.h, NodeRecord) that the control plane keeps about its
// GPUs and software beyond what the agent discovers: planned MIG re-layouts, layouts found
// changed, faulty MIG instances, residue and the version set. Typed here; JSON only in their
// codecs, which read and write exactly the form the store and the REST API carry. FromJson
// refuses what it cannot read (a phase this server does not know, a field of the wrong type)
// with InvalidArgument naming the field; NodeRecord::FromJson reports it as DataLoss.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/devices.h"
#include "runtime/reclaim_check.h"
#include "runtime/states.h"

namespace carve {

// A partition made by a re-layout: its id (PartitionId) and the driver's UUID for it.
struct RelayoutPartition {
  std::string id;
  std::string uuid;
  bool operator==(const RelayoutPartition&) const = default;
};

// A planned MIG re-layout of one GPU (POST /nodes/{name}/gpus/{gpu}/relayout).
struct RelayoutRecord {
  std::vector<std::string> layout;  // the target, "profile@start" sorted by start
  std::vector<std::string> from;    // the layout it replaces, in the same form
  std::string by;                   // the admin who asked
  RelayoutPhase phase = RelayoutPhase::kDraining;
  std::string request;  // the request's id; the agent's result echoes it
  int64_t requested_us = 0;
  std::vector<int64_t> jobs_moved;      // the jobs moved off the GPU for it
  std::optional<int64_t> reclaimed_us;  // every job off with verified reclamation
  std::string error;                    // failed: why (empty otherwise)
  // done: the partitions made and when they were verified.
  std::vector<RelayoutPartition> partitions;
  int64_t done_us = 0;

  // {layout, from, by, phase, request, requested_us, jobs_moved} and, once set, reclaimed_us,
  // error; partitions and done_us in the done phase.
  nlohmann::json ToJson() const;
  static absl::StatusOr<RelayoutRecord> FromJson(const nlohmann::json& j);
  bool operator==(const RelayoutRecord&) const = default;
};

// A MIG instance, as the agent reports it and a layout mismatch keeps it: {uuid, profile, start}.
nlohmann::json MigInstancesToJson(const std::vector<DiscoveredMigInstance>& instances);
absl::StatusOr<std::vector<DiscoveredMigInstance>> MigInstancesFromJson(const nlohmann::json& j);

// A MIG instance by place: its GPU and first memory slice; stored as "GPU/START".
struct MigSlotRef {
  int gpu = 0;
  int start = 0;
  auto operator<=>(const MigSlotRef&) const = default;
};
std::string SlotKey(const MigSlotRef& slot);
std::optional<MigSlotRef> ParseSlotKey(const std::string& key);

// A MIG instance its agent reports unhealthy while its GPU is not.
struct InstanceFault {
  std::string profile;
  std::string health;  // the agent's word: "unhealthy", "suspect", ...
  std::string reason;
  nlohmann::json ToJson() const;  // {profile, health, reason}
  static absl::StatusOr<InstanceFault> FromJson(const nlohmann::json& j);
  bool operator==(const InstanceFault&) const = default;
};

// Device memory in use that neither the GPU's baseline nor a live replica explains.
struct UnexplainedMemory {
  int64_t unexplained_mib = 0;
  int64_t used_mib = 0;
  int64_t baseline_mib = 0;
  bool operator==(const UnexplainedMemory&) const = default;
};

// What an agent still sees on a GPU after reclaims; the heartbeat carries it per GPU and the
// node record keeps it as sent.
struct GpuResidue {
  std::vector<ResidueProcess> processes;
  std::optional<UnexplainedMemory> memory;  // none: memory is explained

  // {processes: [{pid, uid, command, memory_mib, state}], and with memory: unexplained_mib,
  // used_mib, baseline_mib}.
  nlohmann::json ToJson() const;
  static absl::StatusOr<GpuResidue> FromJson(const nlohmann::json& j);
  // "pid 41 (uid 0, defunct, `sleep 30`, 2048 MiB); 512 MiB in use above ...".
  std::string Describe() const;
};

// What a device view (reclaim_check.h) shows beyond `tolerance_mib`: none when it is clean.
std::optional<GpuResidue> ResidueSeen(const DeviceView& view, int64_t tolerance_mib);

// One GPU's part of a version set.
struct GpuVersions {
  int index = 0;
  std::string vbios;
  bool mig = false;
  bool operator==(const GpuVersions&) const = default;
};

// What a node runs, as its agent last registered: software versions, the backend and each GPU's
// VBIOS and MIG mode. `id` ("vs-" and 10 hex digits of their SHA-256) names the set.
struct NodeVersionSet {
  std::string id;
  std::string carve;
  std::string kernel;
  std::string driver;
  std::string cuda_driver;
  std::string nvml;
  std::string backend;
  std::vector<GpuVersions> gpus;

  // {id, carve, kernel, driver, cuda_driver, nvml, backend, gpus: [{index, vbios, mig}]}.
  nlohmann::json ToJson() const;
  // The form a replica, an attempt or a usage record carries: without backend and gpus.
  nlohmann::json Compact() const;
  static absl::StatusOr<NodeVersionSet> FromJson(const nlohmann::json& j);
  bool operator==(const NodeVersionSet&) const = default;
};

// The node's version set from an agent's registration (`reported`: {carve, kernel, driver,
// cuda_driver, nvml}; a field that is not a string counts as empty), with its id.
NodeVersionSet NodeVersions(const nlohmann::json& reported, const std::string& backend,
                            const std::vector<DiscoveredGpu>& gpus);

}  // namespace carve

#endif  // CARVE_RUNTIME_NODE_RECORDS_H_
