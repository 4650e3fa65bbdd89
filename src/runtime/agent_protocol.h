#ifndef CARVE_RUNTIME_AGENT_PROTOCOL_H_
#define CARVE_RUNTIME_AGENT_PROTOCOL_H_

// The agent protocol (POST /api/v1/agents/heartbeat, docs/platform.md), typed and shared by the
// agent (agent.cc) and the server (control_plane_agents.cc): what an agent reports about its
// replicas and GPUs, and what the server answers it to start, stop and lay out. JSON only in the
// codecs, which write exactly the bytes agents and servers exchanged before the types existed
// (AgentProtocolTest), so an older agent and a newer server, or the reverse, understand each
// other. FromJson reads the whole message before anything acts on it and refuses a field it
// cannot read (wrong type, a name outside its set) with InvalidArgument naming the field's path
// ("replicas[0].exit_code: must be a whole number or null"); fields it does not know are
// ignored, and a missing field takes the default written next to it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model/cluster.h"
#include "nlohmann/json.hpp"
#include "runtime/node_records.h"
#include "runtime/records.h"
#include "runtime/states.h"

namespace carve {

// A device's or MIG instance's health as agents say it: "healthy", "suspect" or "unhealthy".
absl::string_view HealthName(DeviceHealth health);
std::optional<DeviceHealth> ParseHealth(absl::string_view name);

// How a replica's command ended: sent with every report once it has.
// Bounds of an agent's self-fencing promise at registration (self_fence: {after_ms, grace_ms}):
// it delays the loss of its jobs, so it may not hold them for longer than this.
inline constexpr int64_t kMaxFenceAfterMs = 3'600'000;
// A wait for work the server refuses (429: as many agents as it lets wait already do) is asked
// again after this long (its Retry-After), not at the heartbeat period: at a thousand nodes,
// refused waits asked every heartbeat were more requests than the heartbeats (docs/scale.md).
inline constexpr int64_t kWaitRefusedRetryMs = 10'000;
// How long an agent waits before it asks for work again after an answer that said nothing new:
// a refusal (ResourceExhausted) kWaitRefusedRetryMs and up to a second more, spread by `node` so
// refused agents do not ask together; anything else its heartbeat period.
int64_t WaitBackoffMs(const absl::Status& answer, absl::string_view node, int64_t heartbeat_ms);
inline constexpr int64_t kMaxFenceGraceMs = 600'000;

struct ReplicaEnd {
  std::optional<int64_t> ended_us;  // none: when the server reads the report
  bool timed_out = false;
  std::optional<int> exit_code;  // it exited (null on the wire otherwise)
  std::optional<int> signal;     // a signal killed it (null on the wire otherwise)
};

// One replica the agent runs or ran: {job, replica, state, pid, started_us, enforcement} and,
// when set, gpu_isolation, log_truncated_at, log_disk, the end's fields, reclaim and oom_killed.
struct ReplicaReport {
  int64_t job = -1;
  int replica = -1;
  // The job's attempt the replica was started for (none: an agent from before attempts were
  // reported). A report of another attempt than the job's is not the replica's on record.
  std::optional<int> attempt;
  std::optional<ReplicaState> state;  // none: not said (nothing changes)
  int64_t pid = 0;
  std::optional<int64_t> started_us;  // none: when the server reads the report
  std::string enforcement;            // what limits it, in words
  nlohmann::json gpu_isolation;       // shares: what enforced their caps (null: none)
  int64_t log_truncated_at = 0;       // its log stops at this many bytes (0: it does not)
  std::string log_disk;               // whether the node's copy of its log is bounded
  std::optional<ReplicaEnd> end;
  // The reclaim record (the agent's checks that the replica left nothing behind), once made;
  // kept as the agent made it: {status, checks: [{name, ok, observed, device?, ...}], ...}.
  std::optional<nlohmann::json> reclaim;
  bool oom_killed = false;  // sent with the reclaim record
  // When the agent stopped it itself, having heard nothing from the server for its
  // --fence-after-ms (the node's clock); none: it did not.
  std::optional<int64_t> fenced_us;

  nlohmann::json ToJson() const;
  static absl::StatusOr<ReplicaReport> FromJson(const nlohmann::json& j, const std::string& at);
};

// A MIG instance the agent lists on a GPU: {uuid, profile, start} and, when it has a fault of
// its own, health and health_reason.
struct MigInstanceReport {
  DiscoveredMigInstance instance;
  std::optional<DeviceHealth> health;  // none: healthy
  std::string health_reason;
};

// One GPU as the agent sees it now: {index, health, health_reason, utilization_pct,
// mig_instances, residue} and share_enforcement when it has one.
struct GpuReport {
  int index = -1;
  DeviceHealth health = DeviceHealth::kHealthy;
  std::string health_reason;
  int utilization_pct = -1;  // -1: unknown
  // Whether its shares' caps are enforced (an MPS daemon runs); none: unchanged.
  std::optional<std::string> share_enforcement;
  std::vector<MigInstanceReport> mig_instances;
  std::optional<GpuResidue> residue;  // none (null on the wire): the device is clean

  nlohmann::json ToJson() const;
  static absl::StatusOr<GpuReport> FromJson(const nlohmann::json& j, const std::string& at);
};

// The result of a layout the server asked for (LayoutOrder), repeated until it stops asking.
struct LayoutResult {
  int gpu = -1;
  std::string request;  // the order's request id
  bool ok = false;
  std::string error;  // why not (empty when ok)
  int64_t time_us = 0;

  nlohmann::json ToJson() const;  // {gpu, request, ok, error, time_us}
  static absl::StatusOr<LayoutResult> FromJson(const nlohmann::json& j, const std::string& at);
};

// The heartbeat: {node, replicas, gpus, layouts}.
struct HeartbeatRequest {
  // Not an aggregate: a braced JSON literal passed to ControlPlane::Heartbeat is JSON.
  HeartbeatRequest() = default;
  std::string node;
  std::vector<ReplicaReport> replicas;
  // None: the agent said nothing of its GPUs (their health, residue and activity stay as known).
  std::optional<std::vector<GpuReport>> gpus;
  std::vector<LayoutResult> layouts;

  nlohmann::json ToJson() const;
  static absl::StatusOr<HeartbeatRequest> FromJson(const nlohmann::json& j);
  // Whether it says a replica has ended (the next cycle may reuse what it held).
  bool ReportsAnEnd() const;
  // The MIG instances it lists on GPU `gpu` (none when it does not list the GPU).
  std::vector<DiscoveredMigInstance> InstancesOn(int gpu) const;
};

// A replica for the agent to start: the job's command, environment and limits, and the devices
// granted to it. {job, replica, name, kind, command, env, workdir, mode, isolation, cpu_milli,
// memory_mib, max_runtime_us, tenant, project, checkpoint_root, attempt, grants} and uid, gid
// when the tenant names them.
struct AgentAssignment {
  int64_t job = 0;
  int replica = 0;
  std::string name;
  std::string kind;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;
  DeliveryMode mode = DeliveryMode::kExclusive;
  std::string isolation;  // "best-effort": a share may run without enforced caps
  int64_t cpu_milli = 0;  // the CPU the cgroup allows: the job's limit, else its request
  int64_t memory_mib = 0;
  // The CPU asked, which sets the group's weight under contention (cpu.weight, cpu.shares);
  // absent or 0 (an older server): the default weight.
  int64_t cpu_request_milli = 0;
  int64_t max_runtime_us = 0;  // 0: none
  std::string tenant = "default";
  std::string project = "default";
  std::string checkpoint_root;  // empty: the agent's own
  int attempt = 0;
  std::vector<GrantRecord> grants;
  std::optional<int64_t> uid;  // the Unix user the tenant's jobs run as
  std::optional<int64_t> gid;

  nlohmann::json ToJson() const;
  static absl::StatusOr<AgentAssignment> FromJson(const nlohmann::json& j, const std::string& at);
};

// A replica for the agent to stop: {job, replica} and grace_ms when its job has a checkpoint
// grace (else the agent's own).
struct StopOrder {
  int64_t job = 0;
  int replica = 0;
  std::optional<int64_t> grace_ms;

  nlohmann::json ToJson() const;
  static absl::StatusOr<StopOrder> FromJson(const nlohmann::json& j, const std::string& at);
};

// A MIG layout for the agent to apply to one GPU: {gpu, layout: ["profile@start", ...],
// request}.
struct LayoutOrder {
  int gpu = -1;
  std::vector<std::string> layout;
  std::string request;

  nlohmann::json ToJson() const;
  static absl::StatusOr<LayoutOrder> FromJson(const nlohmann::json& j, const std::string& at);
};

// The heartbeat's answer: {assignments, stop, layouts}.
struct HeartbeatAnswer {
  std::vector<AgentAssignment> assignments;
  std::vector<StopOrder> stop;
  std::vector<LayoutOrder> layouts;

  nlohmann::json ToJson() const;
  static absl::StatusOr<HeartbeatAnswer> FromJson(const nlohmann::json& j);
};

}  // namespace carve

#endif  // CARVE_RUNTIME_AGENT_PROTOCOL_H_
